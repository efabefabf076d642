"""Prometheus `/metrics` → one normalised schema for every server kind (DESIGN §5).

1. Parse with `prometheus_client.parser.text_string_to_metric_families`; keep every raw sample.
2. Normalise the prefix: `vllm:`, `sglang:` / `sglang_` (proxies rewrite the colon), `llamacpp:`,
   `ddtree:`; the kind is the prefix with the most samples.
3. Read the schema's quantities by their per-kind names (`NAMES`); a quantity is summed over label
   sets (vLLM engines, SGLang ranks), except SGLang's scheduler gauges, which every rank repeats (max).
4. `window(before, after)` differences the counters. A counter that went down means the server
   restarted: the window is flagged `reset` and the after-values (counts since the restart) are used,
   so no delta is ever negative.

τ (tokens per verify step, bonus included) per kind:
  vLLM, llama.cpp, bundled engine  τ = 1 + Δaccepted / Δsteps
  SGLang                           τ = (Δgeneration_tokens − Δrequests) / Δverify_calls (one token per
                                   request comes from prefill, not a verify step); without the counter,
                                   the interval-mean gauge `spec_accept_length`, flagged "gauge".
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from engine_client.exceptions import ProtocolError

__all__ = ["KINDS", "Snapshot", "Window", "parse_metrics", "window"]

KINDS = ("ddtree", "vllm", "sglang", "llamacpp")
_PREFIX = re.compile(r"^(ddtree|vllm|sglang|llamacpp)[:_](.+)$")

_VLLM_STYLE = {
    "steps": ["spec_decode_num_drafts_total"],
    "drafted": ["spec_decode_num_draft_tokens_total"],
    "accepted": ["spec_decode_num_accepted_tokens_total"],
    "per_position": ["spec_decode_num_accepted_tokens_per_pos_total"],
    "generation_tokens": ["generation_tokens_total"],
    "prompt_tokens": ["prompt_tokens_total"],
    "running": ["num_requests_running"],
    "waiting": ["num_requests_waiting"],
    "kv_usage": ["kv_cache_usage_perc"],
}
# Quantity → candidate names after the prefix, first present wins (renames across versions).
NAMES: dict[str, dict[str, list[str]]] = {
    "ddtree": {**_VLLM_STYLE, "requests": ["requests_total"], "accept_length_gauge": ["spec_accept_length"]},
    "vllm": {**_VLLM_STYLE, "requests": ["request_success_total"],
             "kv_usage": ["kv_cache_usage_perc", "gpu_cache_usage_perc"]},
    "sglang": {"steps": ["spec_verify_calls_total"], "generation_tokens": ["generation_tokens_total"],
               "prompt_tokens": ["prompt_tokens_total"], "requests": ["num_requests_total"],
               "running": ["num_running_reqs"], "waiting": ["num_queue_reqs"], "kv_usage": ["token_usage"],
               "accept_length_gauge": ["spec_accept_length"], "accept_rate_gauge": ["spec_accept_rate"],
               "cached_tokens": ["cached_tokens_total"]},
    "llamacpp": {**_VLLM_STYLE,
                 "drafted": ["spec_decode_num_draft_tokens_total", "tokens_drafted_total"],
                 "accepted": ["spec_decode_num_accepted_tokens_total", "tokens_drafted_accepted_total"],
                 "generation_tokens": ["tokens_predicted_total"],
                 "running": ["requests_processing"], "waiting": ["requests_deferred"],
                 "kv_usage": ["kv_cache_usage_ratio"]},
}
COUNTERS = ("steps", "drafted", "accepted", "generation_tokens", "prompt_tokens", "requests")
# SGLang gauges are repeated by every tensor/pipeline rank; summing them would multiply the load.
_MAX_GAUGES = {"sglang"}


@dataclass
class Snapshot:
    kind: str  # ddtree | vllm | sglang | llamacpp | unknown
    taken_at: float  # epoch seconds
    steps: float | None = None
    drafted: float | None = None
    accepted: float | None = None
    per_position: dict[int, float] = field(default_factory=dict)
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    accept_length_gauge: float | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)  # {name, labels, value}: raw, for storage

    def to_dict(self, with_samples: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["per_position"] = {str(k): v for k, v in self.per_position.items()}
        if not with_samples:
            d.pop("samples")
        return d

    @property
    def load(self) -> dict[str, float | None]:
        return {"running": self.running, "waiting": self.waiting, "kv_usage": self.kv_usage}


@dataclass
class Window:
    kind: str
    duration_s: float
    reset: bool  # a counter went down (restart): deltas are counts since the restart
    steps: float | None
    drafted: float | None
    accepted: float | None
    generation_tokens: float | None
    prompt_tokens: float | None
    requests: float | None
    per_position: dict[int, float]
    tau: float | None
    tau_source: str | None  # "counters" | "gauge" (SGLang interval mean) | None
    acceptance_rate: float | None  # accepted / drafted; with a tree, drafted = node budget per step
    per_position_rate: dict[int, float]  # Δaccepted at position i / Δsteps
    running: float | None
    waiting: float | None
    kv_usage: float | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["per_position"] = {str(k): v for k, v in self.per_position.items()}
        d["per_position_rate"] = {str(k): v for k, v in self.per_position_rate.items()}
        return d


def parse_metrics(text: str, taken_at: float | None = None) -> Snapshot:
    """One scrape's exposition text → `Snapshot` (steps 1–3 of the module docstring)."""
    samples: list[dict[str, Any]] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.append({"name": s.name, "labels": dict(s.labels), "value": float(s.value)})
    except (ValueError, TypeError, IndexError) as e:
        raise ProtocolError(f"not Prometheus exposition text: {e}") from e
    by_kind: dict[str, dict[str, list[dict[str, Any]]]] = {k: {} for k in KINDS}
    for s in samples:
        m = _PREFIX.match(s["name"])
        if m:
            by_kind[m.group(1)].setdefault(m.group(2), []).append(s)
    counts = {k: sum(len(v) for v in series.values()) for k, series in by_kind.items()}
    kind = max(KINDS, key=lambda k: counts[k]) if any(counts.values()) else "unknown"
    snap = Snapshot(kind=kind, taken_at=time.time() if taken_at is None else taken_at, samples=samples)
    if kind == "unknown":
        return snap
    series = by_kind[kind]
    for quantity, names in NAMES[kind].items():
        found = _first(series, names)
        if found is None:
            continue
        if quantity == "per_position":
            for s in found:
                pos = s["labels"].get("position")
                if pos is not None and pos.isdigit():
                    snap.per_position[int(pos)] = snap.per_position.get(int(pos), 0.0) + s["value"]
        elif hasattr(snap, quantity):
            values = [s["value"] for s in found]
            gauge = quantity not in COUNTERS
            setattr(snap, quantity, max(values) if gauge and kind in _MAX_GAUGES else sum(values))
    return snap


def _first(series: dict[str, list[dict[str, Any]]], names: list[str]) -> list[dict[str, Any]] | None:
    for name in names:
        # Counters exported without TYPE lines, or by older code, may lack the `_total` suffix.
        for candidate in (name, name.removesuffix("_total")):
            if candidate in series:
                return series[candidate]
    return None


def _delta(before: float | None, after: float | None, reset: bool) -> float | None:
    if after is None:
        return None
    if reset or before is None:
        return after
    return after - before


def window(before: Snapshot, after: Snapshot) -> Window:
    """Counter deltas, τ and acceptance between two snapshots of one server (step 4 of the docstring)."""
    reset = any(getattr(after, c) is not None and getattr(before, c) is not None
                and getattr(after, c) < getattr(before, c) for c in COUNTERS)
    reset = reset or any(v < before.per_position.get(p, 0.0) for p, v in after.per_position.items())
    reset = reset or (before.kind != after.kind and "unknown" not in (before.kind, after.kind))
    d = {c: _delta(getattr(before, c), getattr(after, c), reset) for c in COUNTERS}
    per_pos = {p: _delta(before.per_position.get(p), v, reset) or 0.0 for p, v in after.per_position.items()}
    steps = d["steps"]
    tau, tau_source = None, None
    if steps:
        if after.kind == "sglang":
            if d["generation_tokens"] is not None and d["requests"] is not None:
                tau = (d["generation_tokens"] - d["requests"]) / steps
        elif d["accepted"] is not None:
            tau = 1.0 + d["accepted"] / steps
        tau_source = "counters" if tau is not None else None
    if tau is None and after.kind == "sglang" and after.accept_length_gauge is not None and d["generation_tokens"]:
        tau, tau_source = after.accept_length_gauge, "gauge"  # interval mean; stale when nothing was generated
    rate = d["accepted"] / d["drafted"] if d["drafted"] and d["accepted"] is not None else None
    per_pos_rate = {p: v / steps for p, v in per_pos.items()} if steps else {}
    return Window(kind=after.kind, duration_s=max(0.0, after.taken_at - before.taken_at), reset=reset,
                  per_position=per_pos, tau=tau, tau_source=tau_source, acceptance_rate=rate,
                  per_position_rate=per_pos_rate, running=after.running, waiting=after.waiting,
                  kv_usage=after.kv_usage, **d)
