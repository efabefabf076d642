"""Pieces shared by the training stages: device choice, init, data windows, schedule, logging."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator

import torch
from torch import Tensor, nn


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """GPT-style init: small normal weights, so a tied embedding starts with sane logits."""
    for m in module.modules():
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=std)


def autocast(device: torch.device) -> contextlib.AbstractContextManager[object]:
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def random_windows(stream: Tensor, seq_len: int, batch: int, gen: torch.Generator) -> Tensor:
    """[batch, seq_len] windows at random offsets of a 1-D token stream."""
    starts = torch.randint(0, stream.numel() - seq_len, (batch,), generator=gen)
    return torch.stack([stream[s : s + seq_len] for s in starts.tolist()])


def cosine_lr(step: int, total: int, peak: float, warmup_frac: float = 0.02) -> float:
    warmup = max(1, int(total * warmup_frac))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def schedule(total: int, every: int, max_seconds: float | None = None) -> Iterator[tuple[int, bool]]:
    """Steps 0..total-1, flagging the ones to log; stops early past `max_seconds` (a safety net for
    fixed-length GPU sessions: the cosine schedule is then cut short, and the log says so)."""
    t0 = time.perf_counter()
    for step in range(total):
        late = max_seconds is not None and time.perf_counter() - t0 > max_seconds
        yield step, late or step % every == 0 or step == total - 1
        if late:
            print(f"stopped at step {step + 1}/{total}: time budget {max_seconds:.0f} s spent", file=sys.stderr)
            return


class Log:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)
