from __future__ import annotations

import pytest

from engine_client import ProbePlan


def test_it_defaults_to_the_design_methodology() -> None:
    p = ProbePlan()
    assert p.contexts == (64, 1024, 3072, 5120) and p.outputs == (200, 600, 1200)
    assert (p.n1, p.n2, p.repeats, p.stream_check, p.warmup_tokens) == (64, 320, 3, True, 8)


@pytest.mark.parametrize("kwargs, words", [
    ({"contexts": ()}, "contexts"), ({"contexts": (4,)}, "context"), ({"n1": 320, "n2": 64}, "n1 < n2"),
    ({"repeats": 0}, "repeats"), ({"outputs": (10,)}, "output"), ({"warmup_tokens": -1}, "warmup"),
])
def test_it_rejects_bad_plans_with_a_clear_message(kwargs: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ProbePlan(**kwargs)


def test_it_clamps_contexts_and_outputs_to_the_servers_max_context() -> None:
    p = ProbePlan().clamped(4096)
    assert p.contexts == (64, 1024, 3072, 4096 - 320) and p.outputs == (200, 600, 1200)
    assert any("clamped" in n for n in p.notes)
    assert ProbePlan().clamped(None) == ProbePlan()
    small = ProbePlan().clamped(1000)
    assert small.contexts == (64, 680) and small.outputs == (200, 600)
    with pytest.raises(ValueError):
        ProbePlan().clamped(300)


def test_it_round_trips_through_a_dict() -> None:
    p = ProbePlan(contexts=(64, 256), repeats=2)
    assert ProbePlan.from_dict(p.to_dict()) == p
