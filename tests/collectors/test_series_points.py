"""Which series a probe run touches and its point (median over repeats) in each."""

from __future__ import annotations

from collectors.detection.series import DECODE_TPS, TAU, TTFT, SeriesKey, run_points


def test_it_takes_the_median_of_the_repeats_per_context_and_output_length() -> None:
    ms = [
        {"kind": "two_point", "context": 64, "decode_tps": v, "ttft_s": 0.1} for v in (100.0, 90.0, 200.0)
    ] + [
        {"kind": "two_point", "context": 1024, "decode_tps": 80.0, "ttft_s": None},
        {"kind": "output_sweep", "context": 64, "output_len": 600, "decode_tps": 95.0},
        {"kind": "stream", "context": 64, "decode_tps": 1.0},  # not a series of its own
    ]
    assert run_points(ms, tau=3.2) == {
        SeriesKey(DECODE_TPS, 64): 100.0,
        SeriesKey(TTFT, 64): 0.1,
        SeriesKey(DECODE_TPS, 1024): 80.0,
        SeriesKey(DECODE_TPS, 64, 600): 95.0,
        SeriesKey(TAU): 3.2,
    }


def test_it_skips_missing_and_non_finite_values() -> None:
    ms = [{"kind": "two_point", "context": 64, "decode_tps": float("nan")}, {"kind": "two_point", "context": 64}]
    assert run_points(ms, tau=None) == {}
