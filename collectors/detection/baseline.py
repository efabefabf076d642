"""The fast check: one new point against a robust baseline of the recent stable points.

Median ± k·MAD (scaled to σ for normal noise), because one outlier probe must not move the baseline
the way it would move a mean ± k·σ (Netflix's 4σ-over-40-runs check, notes/monitoring.md §3.3, uses
the mean). A drop never alerts by itself: its verdict is "suspect", which asks for one confirmation
re-probe (collectors/alerts.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

OK = "ok"
SUSPECT = "suspect"  # worse than the baseline: confirm with a re-probe before anyone is told
IMPROVEMENT = "improvement"

MAD_TO_SIGMA = 1.4826  # MAD × this = σ for normally distributed noise
MEAN_AD_TO_SIGMA = 1.2533  # mean absolute deviation × this = σ for normally distributed noise


@dataclass(frozen=True)
class BaselineParams:
    window: int = 20  # the last N stable points
    min_points: int = 5  # fewer: no verdict yet (a new server, or just after a level shift)
    k: float = 4.0  # how many robust σ away counts as a change
    min_rel_change: float = 0.03  # and never less than this relative change (a quiet series has tiny MAD)


@dataclass(frozen=True)
class Baseline:
    level: float  # median
    spread: float  # robust σ (MAD × 1.4826)
    n: int

    def threshold(self, params: BaselineParams) -> float:
        return max(params.k * self.spread, params.min_rel_change * abs(self.level))


@dataclass(frozen=True)
class Verdict:
    kind: str  # OK, SUSPECT or IMPROVEMENT
    value: float
    baseline: Baseline
    rel_change: float  # value/level − 1, signed


def robust_baseline(values: Sequence[float], params: BaselineParams | None = None) -> Baseline | None:
    """The baseline of the last `window` points of `values` (oldest first), or None if too few."""
    params = params or BaselineParams()
    recent = list(values)[-params.window :]
    if len(recent) < params.min_points:
        return None
    level = statistics.median(recent)
    deviations = [abs(v - level) for v in recent]
    mad = statistics.median(deviations)
    if mad == 0:
        # A quantised series (τ of a short probe) often repeats one value in most runs, so its MAD is 0
        # although some runs land elsewhere (measured on the tiny pair: τ 1.955 in 7 of 12 single-pair
        # probes, 1.891 and 2.59 in others). Zero spread would leave only the min_rel_change floor
        # between a −3 % wiggle and an alert; the mean absolute deviation still sees those runs.
        return Baseline(level=level, spread=MEAN_AD_TO_SIGMA * statistics.fmean(deviations), n=len(recent))
    return Baseline(level=level, spread=MAD_TO_SIGMA * mad, n=len(recent))


def check(value: float, baseline: Baseline, *, higher_is_better: bool, params: BaselineParams | None = None) -> Verdict:
    """Classify one new point: within the baseline (OK), worse (SUSPECT) or better (IMPROVEMENT)."""
    params = params or BaselineParams()
    delta = value - baseline.level
    rel = delta / baseline.level if baseline.level else 0.0
    if abs(delta) <= baseline.threshold(params):
        kind = OK
    else:
        worse = delta < 0 if higher_is_better else delta > 0
        kind = SUSPECT if worse else IMPROVEMENT
    return Verdict(kind=kind, value=value, baseline=baseline, rel_change=rel)
