"""Is the server's /metrics still telling the truth? Plain functions over scrape contents (no Django).

- Stale: a probe sent requests, yet the request and generation-token counters did not move between the
  scrape before and the scrape after it (an exporter frozen, cached, or detached from the engine).
- Schema changed: a counter family the normaliser reads (engine_client.metrics.NAMES/COUNTERS for the
  server's kind) was in the earlier scrape and is gone now: vanished, or renamed by an upgrade. The families that
  appeared at the same time are reported as the likely new names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Counters that any probe request must move (each finished request generates tokens).
PROBE_COUNTERS = ("requests", "generation_tokens")


def counters_moved(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool | None:
    """True if a probe-driven counter grew (or reset) between two scrapes' totals; None if unknown."""
    known = [c for c in PROBE_COUNTERS if before.get(c) is not None and after.get(c) is not None]
    if not known:
        return None  # not exported at all: a schema question, not a staleness one
    return any(after[c] != before[c] for c in known)


def _base(name: str) -> str:
    return name.removesuffix("_total")


def read_families(kind: str, names: Iterable[str]) -> set[str]:
    """The sample names among `names` that the normaliser reads for `kind` as counters (what must not vanish).

    Only the plain counters: a labelled family such as the per-position acceptance counter has no
    sample until its first child exists (an engine switched to plain decoding never creates one), and
    gauges come and go with the server's state; their absence is not a schema change.
    """
    from engine_client.metrics import COUNTERS, NAMES

    by_quantity = NAMES.get(kind, {})
    wanted = {_base(n) for q in COUNTERS for n in by_quantity.get(q, [])}
    out = set()
    for name in names:
        prefix, sep, rest = name.partition(":") if ":" in name else name.partition("_")
        if sep and prefix == kind and _base(rest) in wanted:
            out.add(name)
    return out


def schema_change(kind: str, before: Iterable[str], after: Iterable[str]) -> tuple[list[str], list[str]]:
    """(vanished families the normaliser reads, families that appeared) between two scrapes' sample names."""
    before, after = set(before), set(after)
    present = {_base(n) for n in after}
    vanished = sorted(n for n in read_families(kind, before) if _base(n) not in present)
    if not vanished:
        return [], []
    previously = {_base(n) for n in before}
    appeared = sorted({n for n in after if _base(n) not in previously and not n.endswith(("_bucket", "_created"))})
    return vanished, appeared[:20]
