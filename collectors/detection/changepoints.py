"""Change points over a series' history: split with ruptures, then merge with a t-test.

The shape follows Apache Otava / Hunter (Fleming et al., ICPE 2023, arXiv 2301.03034), which
replaced E-divisive's permutation test with a t-test because permutations were not deterministic:

1. Split: PELT (ruptures, least-squares cost) with a deliberately low penalty proposes "weak"
   candidate change points — over-segmenting is fine, the merge step removes the extra ones.
2. Merge: for every candidate, Student's t-test compares the segment before it with the segment
   after it (up to the neighbouring candidates). Pooled variance, because a 3-point segment's own
   variance is too unreliable for Welch's test and made short blips look significant. While any
   candidate fails the Bonferroni-corrected `max_pvalue` or `min_rel_change`, drop the weakest one
   (largest p-value) and re-test its neighbours, whose segments just grew.
3. Refine: each survivor moves to the least-squares best split between its neighbours (the weak
   candidates can sit a few points off the true step).
4. Every survivor is reported with its old/new level and spread, p-value and direction.

Deterministic: PELT is exact and the t-test has no randomness, so the same history always gives the
same answer (a re-run never flips an alert). Why not Otava itself: see collectors/DETECTION.md.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

REGRESSION = "regression"
IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class ChangePointParams:
    # Family-wise over the whole history: each split is tested at max_pvalue / (n − 1) (Bonferroni
    # over the possible split positions). Uncorrected, 0.001 let through a 3–5-point blip in about
    # 1 of 10 pure-noise series of 200 points (σ = 2 %); notes/monitoring.md §3.5 saw the same in Otava.
    max_pvalue: float = 0.001
    min_rel_change: float = 0.03  # |new/old − 1|: smaller steps are not worth anybody's attention
    min_segment: int = 3  # points on each side; fewer cannot carry a t-test
    penalty_factor: float = 1.0  # × σ²·ln(n): low on purpose, the merge step is the real filter


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new level
    old_level: float
    old_spread: float  # sample standard deviation of the segment before
    new_level: float
    new_spread: float
    p_value: float
    rel_change: float  # new/old − 1, signed
    direction: str  # REGRESSION or IMPROVEMENT, given which way is better


def _noise_sigma(x: np.ndarray) -> float:
    # Robust σ from first differences: a level shift touches one difference, noise touches all.
    d = np.diff(x)
    mad = float(np.median(np.abs(d - np.median(d))))
    sigma = 1.4826 * mad / math.sqrt(2.0)
    return sigma if sigma > 0 else float(np.std(x)) or 1e-12


def _candidates(x: np.ndarray, params: ChangePointParams) -> list[int]:
    n = len(x)
    if n < 2 * params.min_segment:
        return []
    pen = params.penalty_factor * _noise_sigma(x) ** 2 * math.log(n)
    algo = ruptures.Pelt(model="l2", min_size=params.min_segment, jump=1).fit(x.reshape(-1, 1))
    return [b for b in algo.predict(pen=pen) if 0 < b < n]  # predict() ends with n itself


def _test(left: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """(p-value, signed relative change) of the step from `left` to `right`."""
    old, new = float(np.mean(left)), float(np.mean(right))
    rel = new / old - 1.0 if old != 0 else math.inf
    if np.std(left) == 0 and np.std(right) == 0:
        p = 0.0 if old != new else 1.0  # identical constants: t-test undefined, the answer is obvious
    else:
        with warnings.catch_warnings():
            # Near-constant segments (a quiet server) trip scipy's precision warning; p is still usable.
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.ttest_ind(left, right, equal_var=True).pvalue)
        p = 1.0 if math.isnan(p) else p
    return p, rel


def _best_split(seg: np.ndarray, min_segment: int) -> int | None:
    """The index in `seg` where one level shift explains it best (least total squared error)."""
    n = len(seg)
    if n < 2 * min_segment:
        return None
    csum, csq = np.cumsum(seg), np.cumsum(seg**2)
    k = np.arange(min_segment, n - min_segment + 1)
    left_sse = csq[k - 1] - csum[k - 1] ** 2 / k
    right_sum, right_sq = csum[-1] - csum[k - 1], csq[-1] - csq[k - 1]
    right_sse = right_sq - right_sum**2 / (n - k)
    return int(k[np.argmin(left_sse + right_sse)])


def _refine(x: np.ndarray, cps: list[int], min_segment: int) -> list[int]:
    cps = list(cps)
    for i in range(len(cps)):
        lo, hi = (cps[i - 1] if i else 0), (cps[i + 1] if i + 1 < len(cps) else len(x))
        best = _best_split(x[lo:hi], min_segment)
        if best is not None:
            cps[i] = lo + best
    return cps


def find_change_points(
    values: Sequence[float], *, higher_is_better: bool = True, params: ChangePointParams | None = None
) -> list[ChangePoint]:
    """Significant, large-enough level shifts in `values` (oldest first), in index order."""
    params = params or ChangePointParams()
    x = np.asarray(values, dtype=float)
    cps = _candidates(x, params)
    alpha = params.max_pvalue / max(1, len(x) - 1)
    while cps:
        bounds = [0, *cps, len(x)]
        tested = [_test(x[bounds[i - 1] : bounds[i]], x[bounds[i] : bounds[i + 1]]) for i in range(1, len(bounds) - 1)]
        failing = [
            (p, i) for i, (p, rel) in enumerate(tested) if p > alpha or abs(rel) < params.min_rel_change
        ]
        if not failing:
            break
        # Drop the weakest failing candidate (largest p; among ties, the smallest step).
        _, worst = max(failing, key=lambda f: (f[0], -abs(tested[f[1]][1])))
        del cps[worst]
    cps = _refine(x, cps, params.min_segment)
    out: list[ChangePoint] = []
    bounds = [0, *cps, len(x)]
    for i in range(1, len(bounds) - 1):
        left, right = x[bounds[i - 1] : bounds[i]], x[bounds[i] : bounds[i + 1]]
        p, rel = _test(left, right)
        worse = rel < 0 if higher_is_better else rel > 0
        out.append(
            ChangePoint(
                index=bounds[i],
                old_level=float(np.mean(left)),
                old_spread=float(np.std(left, ddof=1)) if len(left) > 1 else 0.0,
                new_level=float(np.mean(right)),
                new_spread=float(np.std(right, ddof=1)) if len(right) > 1 else 0.0,
                p_value=p,
                rel_change=rel,
                direction=REGRESSION if worse else IMPROVEMENT,
            )
        )
    return out
