from __future__ import annotations

import json

import pytest

from engine_client import ProtocolError, parse_metrics, window
from tests.engine_client.conftest import fixture_text


def pair(kind: str):
    return parse_metrics(fixture_text(f"{kind}_before.prom")), parse_metrics(fixture_text(f"{kind}_after.prom"))


def test_it_normalises_vllm_counters_with_tau_one_plus_accepted_per_draft() -> None:
    before, after = pair("vllm")
    assert before.kind == "vllm" and before.steps == 4816 and before.requests == 50 and before.kv_usage == 0.031
    w = window(before, after)
    assert (w.steps, w.drafted, w.accepted, w.generation_tokens, w.prompt_tokens, w.requests) == \
        (1000, 7000, 2500, 3500, 2000, 5)
    assert w.tau == pytest.approx(3.5) and w.tau_source == "counters"
    assert w.acceptance_rate == pytest.approx(2500 / 7000)
    assert w.per_position == {0: 900, 1: 800, 2: 800} and w.per_position_rate[0] == pytest.approx(0.9)
    assert (w.running, w.waiting, w.kv_usage, w.reset) == (0, 2, 0.05, False)


@pytest.mark.parametrize("kind", ["sglang", "sglang_underscore"])
def test_it_normalises_sglang_with_either_prefix_using_the_verify_call_formula(kind: str) -> None:
    before, after = pair(kind)
    assert before.kind == "sglang"
    assert before.running == 1  # repeated per tp rank: max, not sum
    assert before.accept_length_gauge == 3.1
    w = window(before, after)
    assert w.steps == 1000 and w.generation_tokens == 3000 and w.requests == 10
    assert w.tau == pytest.approx((3000 - 10) / 1000) and w.tau_source == "counters"
    assert w.drafted is None and w.acceptance_rate is None
    assert (w.running, w.waiting, w.kv_usage) == (0, 3, 0.1)


def test_it_falls_back_to_the_sglang_gauge_when_the_verify_counter_is_missing() -> None:
    def strip(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if "spec_verify_calls" not in line)

    before = parse_metrics(strip(fixture_text("sglang_before.prom")))
    after = parse_metrics(strip(fixture_text("sglang_after.prom")))
    w = window(before, after)
    assert w.tau == 3.1 and w.tau_source == "gauge"


def test_it_normalises_llamacpp_counters_including_per_position_without_total_suffix() -> None:
    before, after = pair("llamacpp")
    assert before.kind == "llamacpp" and before.requests is None
    w = window(before, after)
    assert (w.steps, w.drafted, w.accepted, w.generation_tokens) == (200, 1600, 300, 600)
    assert w.tau == pytest.approx(2.5) and w.per_position == {0: 180, 1: 120}
    assert (w.running, w.waiting, w.kv_usage) == (1, 0, 0.12)


def test_it_normalises_the_bundled_engine_as_vllm_style_counters() -> None:
    before, after = pair("ddtree")
    w = window(before, after)
    assert before.kind == "ddtree" and before.accept_length_gauge == 2.6
    assert (w.steps, w.drafted, w.accepted, w.generation_tokens, w.requests) == (160, 5120, 240, 400, 2)
    assert w.tau == pytest.approx(2.5) == w.generation_tokens / w.steps
    assert w.running == 1


def test_it_detects_a_counter_reset_and_never_emits_a_negative_delta() -> None:
    _, after = pair("ddtree")
    restarted = parse_metrics(fixture_text("ddtree_restarted.prom"))
    w = window(after, restarted)
    assert w.reset is True
    values = [w.steps, w.drafted, w.accepted, w.generation_tokens, w.prompt_tokens, w.requests,
              *w.per_position.values()]
    assert all(v is not None and v >= 0 for v in values)
    assert w.steps == 40 and w.tau == pytest.approx(1 + 60 / 40)


def test_it_keeps_raw_samples_json_safe_for_storage() -> None:
    snap = parse_metrics(fixture_text("vllm_before.prom"))
    assert any(s["name"] == "vllm:spec_decode_num_drafts_total" and s["labels"]["engine"] == "0" for s in snap.samples)
    json.dumps(snap.to_dict(with_samples=True))
    json.dumps(window(*pair("vllm")).to_dict())


def test_it_reports_an_unknown_kind_for_foreign_metrics_and_rejects_garbage() -> None:
    assert parse_metrics("# TYPE foo_total counter\nfoo_total 3\n").kind == "unknown"
    with pytest.raises(ProtocolError):
        parse_metrics("this is {not prometheus\n")
