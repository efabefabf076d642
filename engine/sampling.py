"""Choosing tokens from the target's logits: greedy, or temperature / top-k / top-p with a seed."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class SamplingParams:
    max_tokens: int = 128
    temperature: float = 0.0
    top_k: int = 0  # 0: no top-k cut
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False

    def validate(self) -> None:
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be at least 1 (got {self.max_tokens})")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (got {self.temperature})")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, 0 meaning no cut (got {self.top_k})")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")


class Sampler:
    """One token per row of logits. Banned ids (MASK, PAD, BOS, …) are never chosen."""

    def __init__(self, params: SamplingParams, banned: list[int], device: torch.device) -> None:
        self.params = params
        self.banned = torch.tensor(banned, dtype=torch.long, device=device)
        self.generator: torch.Generator | None = None
        if params.temperature > 0:
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(params.seed if params.seed is not None else torch.seed())

    def choose(self, logits: Tensor) -> Tensor:
        """logits [M, V] → token ids [M]; rows are independent (one draw per tree node)."""
        logits = logits.float()
        if self.banned.numel():
            logits = logits.index_fill(-1, self.banned, float("-inf"))
        if self.generator is None:
            return logits.argmax(-1)
        return torch.multinomial(self.probabilities(logits), 1, generator=self.generator).squeeze(-1)

    def probabilities(self, logits: Tensor) -> Tensor:
        p = self.params
        logits = logits / p.temperature
        if p.top_k > 0 and p.top_k < logits.shape[-1]:
            kth = logits.topk(p.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if p.top_p < 1.0:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            cum = sorted_logits.softmax(-1).cumsum(-1)
            # Drop a token when the mass before it already reaches top_p; the best token always stays.
            drop = (cum - sorted_logits.softmax(-1)) >= p.top_p
            logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
        return logits.softmax(-1)
