"""Preallocated key/value cache for one sequence (or a batch of equal-length sequences).

Layout [layers, N, rows, kv_heads, head_dim]. A verify pass writes 1 + B rows past the committed
length; `commit` then gathers the accepted rows into place. Rows past the committed length are
scratch: the next verify overwrites them, so rejected nodes need no cleanup.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class KVCache:
    def __init__(
        self,
        layers: int,
        kv_heads: int,
        head_dim: int,
        rows: int,
        *,
        batch: int = 1,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (layers, batch, rows, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.rows = rows
        self.window: int | None = None  # set on drafter caches to read only the recent rows
        self.window_start = 0

    def write(self, layer: int, start: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v ([N, T, KV, hd]) at rows [start, start+T); return the visible rows [lo, start+T)."""
        end = start + k.shape[1]
        if end > self.rows:
            raise ValueError(f"KV cache overflow: rows {start}..{end} exceed its {self.rows} rows")
        self.k[layer, :, start:end] = k
        self.v[layer, :, start:end] = v
        lo = self.read_start(end)
        return self.k[layer, :, lo:end], self.v[layer, :, lo:end]

    def read_start(self, end: int) -> int:
        return 0 if self.window is None else max(0, end - self.window)

    def commit(self, start: int, accepted: Sequence[int]) -> None:
        """Move rows start+accepted[j] to start+j for every layer, in place.

        `accepted` is ascending (a tree path: parent index < child index) and starts at 0, so
        row start+j is never overwritten before it is read. A chain 0, 1, 2, … is already in place.
        """
        n = len(accepted)
        if list(accepted) == list(range(n)):
            return
        src = torch.as_tensor(accepted, device=self.k.device) + start
        # Advanced indexing copies the source rows first, so the overlapping move is safe.
        self.k[:, :, start : start + n] = self.k[:, :, src]
        self.v[:, :, start : start + n] = self.v[:, :, src]
