"""A whole probe of the real bundled engine (tiny, CPU): what the issue's "What must be true" asks."""

from __future__ import annotations

import json
import statistics

import pytest

from engine_client import ProbeReport
from tests.engine_client.conftest import SMALL_PLAN


def test_it_measures_positive_rates_for_every_context_and_output(probe_report: ProbeReport) -> None:
    two_point = probe_report.of_kind("two_point")
    assert len(two_point) == len(SMALL_PLAN.contexts) * SMALL_PLAN.repeats
    for m in two_point + probe_report.of_kind("output_sweep"):
        assert m.t2 > m.t1 > 0 and m.decode_tps > 0 and m.e2e_s > 0
        assert m.prompt_tokens == m.context and m.cached_tokens == 0
    assert set(probe_report.decode_by_context()) == {64, 256}
    assert set(probe_report.decode_by_output()) == {96}
    assert not probe_report.contaminated, probe_report.contamination_reason


def test_it_finds_tau_from_counters_equal_to_tau_from_response_fields(probe_report: ProbeReport) -> None:
    a = probe_report.acceptance
    assert a["tau_counters"] is not None and a["tau_counters"] > 1
    assert a["tau_counters"] == pytest.approx(a["tau_responses"], rel=1e-9)
    assert a["agree"] is True and a["steps"] == a["response_steps"]
    assert 0 < a["acceptance_rate"] < 1


def test_it_measures_a_two_point_rate_within_ten_percent_of_the_server_side_decode_rate(
        probe_report: ProbeReport) -> None:
    for ctx in SMALL_PLAN.contexts:
        ms = [m for m in probe_report.of_kind("two_point") if m.context == ctx]
        client_rate = statistics.median(m.decode_tps for m in ms)
        server_rate = statistics.median(m.server_decode_tps for m in ms)
        assert client_rate == pytest.approx(server_rate, rel=0.10), (ctx, client_rate, server_rate)


def test_it_runs_a_streaming_check_with_chunk_statistics(probe_report: ProbeReport) -> None:
    (m,) = probe_report.of_kind("stream")
    st = probe_report.stream
    assert m.ttft_s > 0 and m.e2e_s > m.ttft_s and m.streamed_tps > 0
    assert m.tokens_per_chunk >= 1 and m.chunk_gap_mean_s > 0 and m.chunk_gap_p95_s >= m.chunk_gap_mean_s * 0.5
    assert st["chunks"] > 1 and st["two_point_tps"] > 0
    # Loopback, no proxy: the stream shows the server's own rate, as the server timed that same request.
    assert st["reference"] == "stream_server_decode", st
    assert st["transport_artefact"] is False, st


def test_it_reports_load_fingerprint_and_a_json_safe_dict(probe_report: ProbeReport) -> None:
    d = probe_report.to_dict()
    json.dumps(d, allow_nan=False)
    for key in ("url", "started_at", "finished_at", "fingerprint", "load_before", "load_after", "contaminated",
                "contamination_reason", "acceptance", "measurements", "summary", "plan", "canary_version"):
        assert key in d, key
    assert d["load_before"]["running"] == 0 and d["load_after"]["waiting"] == 0
    assert d["fingerprint"]["kind"] == "ddtree" and d["finished_at"] >= d["started_at"]
    assert {"kind", "context", "output_len", "repeat", "n1", "n2", "t1", "t2", "decode_tps", "ttft_s", "e2e_s",
            "streamed_tps", "chunk_gap_mean_s", "chunk_gap_p95_s", "tokens_per_chunk", "tau_response",
            "server_decode_s"} <= set(d["measurements"][0])
