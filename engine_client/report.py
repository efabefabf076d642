"""What a probe run produces: one `Measurement` per sample and a `ProbeReport` (JSON-safe `to_dict()`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Measurement", "ProbeReport", "spread"]


def spread(values: list[float]) -> float | None:
    """Half the range (max − min) / 2: with 3 repeats a median ± spread says more than a stdev."""
    return (max(values) - min(values)) / 2 if len(values) > 1 else (0.0 if values else None)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


@dataclass
class Measurement:
    kind: str  # "two_point" | "output_sweep" | "stream"
    context: int  # prompt tokens asked for
    output_len: int  # max_tokens of the (longest) request
    repeat: int
    n1: int | None = None
    n2: int | None = None
    t1: float | None = None  # e2e seconds of the N1 request
    t2: float | None = None  # e2e seconds of the N2 request
    decode_tps: float | None = None  # (n2 − n1) / (t2 − t1)
    ttft_s: float | None = None  # streamed only: first token's arrival
    e2e_s: float | None = None
    streamed_tps: float | None = None
    chunk_gap_mean_s: float | None = None
    chunk_gap_p95_s: float | None = None
    tokens_per_chunk: float | None = None
    tau_response: float | None = None  # from the response fields of this sample's requests
    server_decode_s: float | None = None  # server-side decode time difference (d2 − d1), two-point only
    server_decode_tps: float | None = None  # (n2 − n1) / (d2 − d1)
    prompt_tokens: int | None = None  # as the server counted them
    cached_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProbeReport:
    url: str
    started_at: float  # epoch seconds
    finished_at: float | None = None
    plan: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] | None = None
    canary_version: str = ""
    load_before: dict[str, float | None] = field(default_factory=dict)
    load_after: dict[str, float | None] = field(default_factory=dict)
    contaminated: bool = False
    contamination_reason: str | None = None
    acceptance: dict[str, Any] = field(default_factory=dict)
    stream: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)  # transport_artefact, tau_disagreement, prefix_cache_hit, …
    notes: list[str] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    requests_sent: int = 0

    def contaminate(self, reason: str) -> None:
        self.contaminated = True
        self.contamination_reason = reason if not self.contamination_reason else \
            f"{self.contamination_reason}; {reason}"

    def of_kind(self, kind: str) -> list[Measurement]:
        return [m for m in self.measurements if m.kind == kind]

    def _summary(self, kind: str, key: str) -> dict[int, dict[str, float | int | None]]:
        groups: dict[int, list[float]] = {}
        for m in self.of_kind(kind):
            v = m.decode_tps
            if v is not None and math.isfinite(v):
                groups.setdefault(m.context if key == "context" else m.output_len, []).append(v)
        return {k: {"median": statistics.median(v), "spread": spread(v), "n": len(v)}
                for k, v in sorted(groups.items())}

    def decode_by_context(self) -> dict[int, dict[str, float | int | None]]:
        """{context: {median, spread, n}} of two-point decode tok/s."""
        return self._summary("two_point", "context")

    def decode_by_output(self) -> dict[int, dict[str, float | int | None]]:
        """{output length: {median, spread, n}} of the output sweep's decode tok/s."""
        return self._summary("output_sweep", "output")

    def median_decode_tps(self, context: int) -> float | None:
        s = self.decode_by_context().get(context)
        return None if s is None else s["median"]  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measurements"] = [m.to_dict() for m in self.measurements]
        d["summary"] = {"decode_by_context": {str(k): v for k, v in self.decode_by_context().items()},
                        "decode_by_output": {str(k): v for k, v in self.decode_by_output().items()}}
        return _json_safe(d)


def _json_safe(x: Any) -> Any:
    """NaN/inf → None and tuples → lists, so `json.dumps` (and JSONField) accept the result."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x
