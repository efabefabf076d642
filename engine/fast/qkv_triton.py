"""One Triton kernel for what follows the fused q/k/v projection in every attention layer.

In PyTorch that is ~9 launches per layer (per-head RMSNorm of q and k, its weight, RoPE as
roll/mul/mul/add, two `index_copy_` into the cache); here it is one, with one program per
(token, head): normalise q and k heads in fp32, rotate them (rotate-half form), write q to its
output and k, v straight into the cache rows. For a launch-bound small model that is ~40 fewer
kernels per target pass. Numerics: fp32 throughout and one rounding at the end, where the
PyTorch path rounds to the model dtype after each op, so bf16 results differ in the last bits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _qkv_kernel(
    qkv,
    norm_w,
    cos,
    sin,
    positions,
    rows,
    q_out,
    k_cache,
    v_cache,
    eps,
    H: tl.constexpr,
    KV: tl.constexpr,
    HD: tl.constexpr,
):
    t = tl.program_id(0)
    j = tl.program_id(1)  # head: q heads, then k heads, then v heads
    d = tl.arange(0, HD)
    src = qkv + t * (H + 2 * KV) * HD + j * HD
    row = tl.load(rows + t)
    if j < H + KV:
        x = tl.load(src + d).to(tl.float32)
        xr = tl.load(src + (d + HD // 2) % HD).to(tl.float32)  # roll by half: rotate_half up to sign
        inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / HD + eps)
        w = tl.load(norm_w + j * HD + d).to(tl.float32)
        wr = tl.load(norm_w + j * HD + (d + HD // 2) % HD).to(tl.float32)
        pos = tl.load(positions + t)
        c = tl.load(cos + pos * HD + d)
        s = tl.load(sin + pos * HD + d)  # first half negated
        y = (x * w * c + xr * wr * s) * inv
        if j < H:
            tl.store(q_out + (t * H + j) * HD + d, y.to(q_out.dtype.element_ty))
        else:
            tl.store(k_cache + (row * KV + (j - H)) * HD + d, y.to(k_cache.dtype.element_ty))
    else:
        tl.store(v_cache + (row * KV + (j - H - KV)) * HD + d, tl.load(src + d))


def qkv_store(
    qkv: Tensor,
    norm_w: Tensor,
    cos: Tensor,
    sin: Tensor,
    positions: Tensor,
    rows: Tensor,
    cache: Tensor,
    heads: int,
    kv_heads: int,
    eps: float,
) -> Tensor:
    """qkv [T, (H+2KV)·hd] → q [1, T, H, hd]; k and v written at cache[0|1, rows] ([2, rows, KV, hd])."""
    t, hd = qkv.shape[0], cache.shape[-1]
    q = torch.empty(1, t, heads, hd, dtype=qkv.dtype, device=qkv.device)
    _qkv_kernel[(t, heads + 2 * kv_heads)](
        qkv, norm_w, cos, sin, positions, rows, q, cache[0], cache[1], eps, H=heads, KV=kv_heads, HD=hd, num_warps=1
    )
    return q
