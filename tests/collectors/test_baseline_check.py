"""The fast robust-baseline check (median ± k·MAD) on generated points."""

from __future__ import annotations

import numpy as np
import pytest

from collectors.detection.baseline import IMPROVEMENT, OK, SUSPECT, BaselineParams, check, robust_baseline


def history(seed: int = 0, n: int = 30, sigma: float = 0.01) -> list[float]:
    return list(100.0 * (1.0 + sigma * np.random.default_rng(seed).standard_normal(n)))


def test_it_has_no_verdict_on_too_few_points() -> None:
    assert robust_baseline([100.0, 101.0], BaselineParams(min_points=5)) is None


def test_it_uses_only_the_last_window_of_points() -> None:
    base = robust_baseline([50.0] * 10 + [100.0] * 20, BaselineParams(window=20))
    assert base is not None and base.level == 100.0 and base.n == 20


@pytest.mark.parametrize("drop", [0.05, 0.10, 0.30])
def test_it_suspects_a_drop(drop: float) -> None:
    base = robust_baseline(history())
    assert base is not None
    verdict = check(base.level * (1 - drop), base, higher_is_better=True)
    assert verdict.kind == SUSPECT
    assert verdict.rel_change == pytest.approx(-drop)


def test_it_accepts_a_point_within_the_noise() -> None:
    base = robust_baseline(history())
    assert base is not None
    assert check(base.level * 0.985, base, higher_is_better=True).kind == OK


def test_it_never_flags_less_than_the_minimum_change_on_a_quiet_series() -> None:
    # Zero spread: without the relative floor, any difference at all would be "suspect".
    base = robust_baseline([100.0] * 10)
    assert base is not None and base.spread == 0
    assert check(98.0, base, higher_is_better=True).kind == OK
    assert check(96.0, base, higher_is_better=True).kind == SUSPECT


def test_it_calls_a_rise_in_throughput_an_improvement_and_a_rise_in_ttft_suspect() -> None:
    base = robust_baseline(history())
    assert base is not None
    assert check(base.level * 1.2, base, higher_is_better=True).kind == IMPROVEMENT
    assert check(base.level * 1.2, base, higher_is_better=False).kind == SUSPECT


def test_it_is_not_moved_by_one_outlier_in_the_baseline() -> None:
    base = robust_baseline(history() + [20.0])
    assert base is not None and base.level == pytest.approx(100.0, abs=1.0)


@pytest.mark.parametrize("seed", range(5))
def test_it_rarely_suspects_noise(seed: int) -> None:
    points = history(seed, n=200, sigma=0.02)
    suspects = 0
    for i in range(20, len(points)):
        base = robust_baseline(points[:i])
        assert base is not None
        suspects += check(points[i], base, higher_is_better=True).kind == SUSPECT
    # A suspect only costs one re-probe (a confirmation must also be low before any alert).
    assert suspects <= 2


def test_a_quantised_series_with_zero_mad_still_has_a_spread() -> None:
    # τ of single-pair probes of the tiny engine (measured): mostly one value, sometimes another.
    taus = [1.9545] * 7 + [1.891, 1.891, 2.588, 2.588, 1.9333]
    base = robust_baseline(taus, BaselineParams(window=20))
    assert base is not None and base.level == 1.9545 and base.spread > 0
    assert check(1.891, base, higher_is_better=True).kind == OK  # −3.3 %: a value the series takes anyway
    assert check(1.0, base, higher_is_better=True).kind == SUSPECT  # plain decoding: τ = 1
