"""Per-generation speculative statistics, returned with every generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STAGES = ("draft", "tree_build", "verify", "commit")


@dataclass
class GenerationStats:
    algorithm: str
    budget: int  # drafted nodes per round (0 for ar, block_size − 1 for dflash)
    block_size: int
    rounds: int = 0  # verify passes after prefill
    accept_lengths: list[int] = field(default_factory=list)  # τ per round: accepted nodes incl. root
    accepted_per_depth: list[int] = field(default_factory=list)  # [d-1] = rounds that accepted depth d
    drafted_nodes: int = 0
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    round_stage_seconds: list[tuple[float, ...]] = field(default_factory=list)  # per round, in STAGES order
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    def record_round(self, tree_size: int, accepted_depths: list[int], stage_seconds: tuple[float, ...]) -> None:
        self.rounds += 1
        self.round_stage_seconds.append(stage_seconds)
        for name, sec in zip(STAGES, stage_seconds, strict=True):
            self.stage_seconds[name] += sec
        self.drafted_nodes += tree_size
        self.accept_lengths.append(1 + len(accepted_depths))
        for d in accepted_depths:
            self.accepted_per_depth[d - 1] += 1

    @property
    def tau(self) -> float:
        """Mean tokens committed per verify pass, bonus included (1.0 for plain decoding)."""
        return sum(self.accept_lengths) / self.rounds if self.rounds else 0.0

    @property
    def accepted_drafts(self) -> int:
        return sum(self.accept_lengths) - self.rounds

    def histogram(self) -> list[int]:
        """[k] = rounds whose τ was k + 1, for k + 1 from 1 to the most a round can commit: block_size,
        or more along a lookup branch (1 + the depths in accepted_per_depth)."""
        hist = [0] * max(self.block_size, 1 + len(self.accepted_per_depth), 1)
        for t in self.accept_lengths:
            hist[t - 1] += 1
        return hist

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "budget": self.budget,
            "block_size": self.block_size,
            "rounds": self.rounds,
            "tau": self.tau,
            "accept_lengths": self.accept_lengths,
            "accept_length_histogram": self.histogram(),
            "accepted_per_depth": self.accepted_per_depth,
            "drafted_nodes": self.drafted_nodes,
            "accepted_drafts": self.accepted_drafts,
            "stage_seconds": dict(self.stage_seconds),
            "prefill_seconds": self.prefill_seconds,
            "decode_seconds": self.decode_seconds,
        }
