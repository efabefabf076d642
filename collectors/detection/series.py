"""Series keys and a probe run's points (DESIGN §6).

A series is (server, quantity, context, output length), independent of the server fingerprint.
Points are per-run medians of the repeats; contaminated or unsuccessful runs never reach here
(the caller filters them) because a busy server's numbers are not the server's performance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DECODE_TPS = "decode_tps"
TAU = "tau"
TTFT = "ttft"
TAU_SCRAPE = "tau_scrape"  # τ over scrape windows of live traffic (collectors/alerts_metrics.py), not probes

# Which way is better: decode rate and acceptance up, time to first token down.
HIGHER_IS_BETTER = {DECODE_TPS: True, TAU: True, TTFT: False, TAU_SCRAPE: True}

# output_len 0 = not an output-sweep point (the two-point pairs; run-level τ). Not NULL, because the
# one-open-alert-per-series unique constraint treats NULLs as distinct.
NO_OUTPUT = 0


@dataclass(frozen=True, order=True)
class SeriesKey:
    quantity: str
    context: int = 0
    output_len: int = NO_OUTPUT

    @property
    def higher_is_better(self) -> bool:
        return HIGHER_IS_BETTER[self.quantity]

    def label(self) -> str:
        parts = [self.quantity]
        if self.context:
            parts.append(f"ctx {self.context}")
        if self.output_len:
            parts.append(f"out {self.output_len}")
        return " · ".join(parts)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def run_points(measurements: Iterable[Mapping[str, Any]], tau: float | None = None) -> dict[SeriesKey, float]:
    """The points one probe run contributes: {series key: median over its repeats}.

    `measurements` are ProbeMeasurement-like mappings (kind, context, output_len, decode_tps, ttft_s);
    `tau` is the run's acceptance length (counters preferred over response fields, chosen by the caller).
    """
    groups: dict[SeriesKey, list[float]] = {}
    for m in measurements:
        kind, ctx = m.get("kind"), int(m.get("context") or 0)
        tps, ttft = _finite(m.get("decode_tps")), _finite(m.get("ttft_s"))
        if kind == "two_point":
            if tps is not None and tps > 0:
                groups.setdefault(SeriesKey(DECODE_TPS, ctx), []).append(tps)
            if ttft is not None and ttft > 0:
                groups.setdefault(SeriesKey(TTFT, ctx), []).append(ttft)
        elif kind == "output_sweep" and tps is not None and tps > 0:
            out = int(m.get("output_len") or 0)
            groups.setdefault(SeriesKey(DECODE_TPS, ctx, out), []).append(tps)
    points = {key: statistics.median(values) for key, values in groups.items()}
    t = _finite(tau)
    if t is not None and t > 0:
        points[SeriesKey(TAU)] = t
    return points
