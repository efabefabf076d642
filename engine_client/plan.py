"""`ProbePlan`: what one probe run measures (DESIGN §4), validated, JSON round-trippable."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["ProbePlan"]


@dataclass(frozen=True)
class ProbePlan:
    contexts: tuple[int, ...] = (64, 1024, 3072, 5120)  # prompt tokens of the context sweep
    outputs: tuple[int, ...] = (200, 600, 1200)  # completion lengths of the output sweep
    output_context: int = 64  # the short context the output sweep runs at
    n1: int = 64  # two-point pair: max_tokens of the short member
    n2: int = 320  # … and of the long member
    repeats: int = 3
    stream_check: bool = True
    warmup_tokens: int = 8
    seed: int = 0
    # A streamed rate this much below the two-point rate is blamed on the transport (proxy, tunnel).
    stream_gap: float = 0.25
    # τ from counters and τ from responses agree when within this relative difference.
    tau_tolerance: float = 0.02
    notes: tuple[str, ...] = field(default=(), compare=False)  # what clamping changed, for the report

    def __post_init__(self) -> None:
        object.__setattr__(self, "contexts", tuple(self.contexts))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "notes", tuple(self.notes))
        problems = []
        if not self.contexts:
            problems.append("contexts must not be empty")
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 16 for c in self.contexts):
            problems.append(f"every context must be an integer >= 16 tokens, got {list(self.contexts)}")
        if any(isinstance(o, bool) or not isinstance(o, int) or o <= self.n1 for o in self.outputs):
            problems.append(f"every output length must be an integer > n1 ({self.n1}), got {list(self.outputs)}")
        if not (isinstance(self.n1, int) and isinstance(self.n2, int) and 1 <= self.n1 < self.n2):
            problems.append(f"need 1 <= n1 < n2, got n1={self.n1}, n2={self.n2}")
        if not isinstance(self.repeats, int) or not 1 <= self.repeats <= 50:
            problems.append(f"repeats must be 1..50, got {self.repeats}")
        if not isinstance(self.warmup_tokens, int) or self.warmup_tokens < 0:
            problems.append(f"warmup_tokens must be >= 0, got {self.warmup_tokens}")
        if self.output_context < 16:
            problems.append(f"output_context must be >= 16, got {self.output_context}")
        if not 0 < self.stream_gap < 1 or not 0 < self.tau_tolerance < 1:
            problems.append("stream_gap and tau_tolerance must be fractions in (0, 1)")
        if problems:
            raise ValueError("invalid probe plan: " + "; ".join(problems))

    def clamped(self, max_context: int | None) -> ProbePlan:
        """The plan fitted to a server whose prompt + completion may not exceed `max_context` tokens."""
        if not max_context:
            return self
        notes = list(self.notes)
        room = max_context - self.n2
        if room < 16:
            raise ValueError(f"n2={self.n2} does not fit the server's max context {max_context}")
        contexts = sorted({min(c, room) for c in self.contexts})
        if list(contexts) != sorted(set(self.contexts)):
            notes.append(f"contexts clamped to {contexts} (max context {max_context}, n2 {self.n2})")
        outputs = sorted({o for o in self.outputs if self.output_context + o <= max_context})
        if outputs != sorted(set(self.outputs)):
            notes.append(f"outputs limited to {outputs} (max context {max_context})")
        return replace(self, contexts=tuple(contexts), outputs=tuple(outputs), notes=tuple(notes))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["contexts"], d["outputs"], d["notes"] = list(self.contexts), list(self.outputs), list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbePlan:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)
