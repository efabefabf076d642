"""The change-point detector on generated series with fixed seeds (no Django, no database)."""

from __future__ import annotations

import numpy as np
import pytest

from collectors.detection.changepoints import IMPROVEMENT, REGRESSION, find_change_points

SEEDS = range(8)


def series(seed: int, n: int, sigma: float, step_at: int | None = None, step: float = 0.0) -> np.ndarray:
    """A level of 100 with relative Gaussian noise σ, times (1 + step) from `step_at` on."""
    x = 100.0 * (1.0 + sigma * np.random.default_rng(seed).standard_normal(n))
    if step_at is not None:
        x[step_at:] *= 1.0 + step
    return x


@pytest.mark.parametrize("step", [-0.05, -0.10, -0.30])
@pytest.mark.parametrize("seed", SEEDS)
def test_it_finds_a_drop_at_the_right_index(step: float, seed: int) -> None:
    found = find_change_points(series(seed, 60, 0.01, step_at=40, step=step))
    assert len(found) == 1
    cp = found[0]
    assert abs(cp.index - 40) <= 1
    assert cp.direction == REGRESSION
    assert cp.rel_change == pytest.approx(step, abs=0.015)
    assert cp.p_value < 0.001


@pytest.mark.parametrize("step", [-0.10, -0.30])
@pytest.mark.parametrize("seed", SEEDS)
def test_it_finds_a_larger_drop_under_two_percent_noise(step: float, seed: int) -> None:
    found = find_change_points(series(seed, 60, 0.02, step_at=40, step=step))
    assert [abs(cp.index - 40) <= 1 for cp in found] == [True]


@pytest.mark.parametrize("seed", range(20))
def test_it_finds_nothing_in_pure_noise(seed: int) -> None:
    assert find_change_points(series(seed, 200, 0.02)) == []


def test_it_ignores_a_significant_step_smaller_than_the_minimum_change() -> None:
    # 2 % under 0.2 % noise is highly significant, but below the 3 % floor.
    assert find_change_points(series(0, 80, 0.002, step_at=40, step=-0.02)) == []


def test_it_classifies_a_rise_in_throughput_as_an_improvement() -> None:
    [cp] = find_change_points(series(1, 60, 0.01, step_at=30, step=0.08))
    assert cp.direction == IMPROVEMENT and cp.new_level > cp.old_level


def test_it_classifies_a_rise_in_ttft_as_a_regression() -> None:
    [cp] = find_change_points(series(2, 60, 0.01, step_at=30, step=0.20), higher_is_better=False)
    assert cp.direction == REGRESSION


def test_it_finds_two_steps_in_one_history() -> None:
    x = series(3, 90, 0.01, step_at=30, step=-0.10)
    x[60:] /= 0.9  # back to the old level
    assert [(cp.index, cp.direction) for cp in find_change_points(x)] == [(30, REGRESSION), (60, IMPROVEMENT)]


def test_it_gives_the_same_answer_every_time() -> None:
    x = series(4, 120, 0.02, step_at=70, step=-0.10)
    assert find_change_points(x) == find_change_points(x)


def test_it_needs_a_few_points_on_each_side() -> None:
    assert find_change_points([100.0, 100.0, 50.0]) == []
    assert find_change_points([]) == []
