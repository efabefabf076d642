"""The projections of a layer as Triton kernels with their neighbours fused in.

A small model is launch-bound: each PyTorch op is a kernel of a few microseconds, however little it
computes. Per layer the PyTorch path runs RMSNorm, the q/k/v matmul, the q/k norm + RoPE + cache
write, o_proj, the residual add, RMSNorm, gate/up, SiLU, the product, down and the residual add;
with these kernels that is four launches besides attention:

  qkv_linear   RMSNorm of the input (prologue) → x·Wqkvᵀ → per-head RMSNorm of q and k, RoPE,
               q to its buffer and k, v straight into the cache rows (epilogue). One program per
               (row tile, head); the head's two halves are separate accumulators, which is what
               rotate-half RoPE pairs up. Without the norm it also serves the drafter's context K/V.
  linear       x·Wᵀ with an optional RMSNorm prologue and one epilogue: SwiGLU (W = [gate; up],
               out = silu(x·Wgᵀ) · x·Wuᵀ) or the residual add (out = res + x·Wᵀ).

Numerics: fp32 accumulation and one rounding of the result, where PyTorch rounds after each op; the
input times the norm weight is rounded to the weight dtype before the matmul (PyTorch rounds the
normalised input: the per-row 1/rms is applied here to the fp32 accumulator), and q/k/v are rounded
before their norm, as in PyTorch. Each output row depends only on its own input row, summed over K
in the same block order whatever the row count (only the tile height and warps change), so a 1-row
pass and a 65-row pass compute a row alike (cuBLAS picks different kernels for the two). fp32 inputs
use IEEE matmuls (no TF32), so fp32 stays exact enough for the CPU comparison
(tests/engine/test_fast_triton.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from engine.kernels import pdl

BLOCK_K = 128
# The q/k/v kernel's: a program there owns a whole head (64 columns, for its norm and RoPE) and loads
# twice a `linear` program's weight tile per step; 64 made ar 1.5 % faster on the H200 (all kernels at
# 64: ar 9 % slower).
QKV_BLOCK_K = 64
# Output columns per program (gate and up columns each, with SwiGLU). Narrow tiles put more programs on
# the SMs, each streaming fewer weight bytes: on the H200, 32 beat 64 (ar +5 %, ddtree +2 %) and 16.
BLOCK_N = 32


def _block_m(m: int) -> int:
    # A one-row pass also takes a 16-row tensor-core tile: on the H200, one row as products summed on
    # the CUDA cores (BLOCK_M = 1) made ar 21 % slower.
    return 16 if m <= 16 else 32 if m <= 32 else 64


@triton.jit
def _dot(x, w, IEEE: tl.constexpr):
    """x [BLOCK_M, BLOCK_K] · w [BLOCK_K, N], accumulated in fp32 (IEEE: exact fp32, no TF32)."""
    if IEEE:
        return tl.dot(x, w, input_precision="ieee")
    else:
        return tl.dot(x, w)


def _warps(m: int) -> int:
    # A one-row pass has too little work per tile for four warps: with two, ar ran 3-8 % faster on the
    # H200; the 65-row verify pass ran 9 % slower with two (16 rows: no difference).
    return 2 if m <= 4 else 4


@triton.jit
def _x_tile(
    x_ptr, stride, rows, row_ok, k0, K, norm_w, PRE_NORM: tl.constexpr, dtype: tl.constexpr, BLOCK_K: tl.constexpr
):
    """Rows × BLOCK_K of the input (times the norm weight if PRE_NORM, rounded to `dtype`) and each
    row's sum of squares over the tile. RMSNorm's 1/rms is a per-row factor, so it is applied to the
    accumulator after the loop: one pass over the input instead of two."""
    cols = k0 + tl.arange(0, BLOCK_K)
    k_ok = cols < K
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
    x32 = x.to(tl.float32)
    if PRE_NORM:
        w = tl.load(norm_w + cols, mask=k_ok, other=0.0).to(tl.float32)
        x = (x32 * w[None, :]).to(dtype)
    return x.to(dtype), tl.sum(x32 * x32, axis=1)


@triton.jit(do_not_specialize=["M"])  # one compiled variant for every row count
def _linear_kernel(
    x_ptr, w_ptr, out_ptr, norm_w, res_ptr, bias_ptr,
    M, N, K, eps, stride_x, stride_o, stride_r,
    PRE_NORM: tl.constexpr, SWIGLU: tl.constexpr, RESIDUAL: tl.constexpr, BIAS: tl.constexpr, IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl.gdc(GDC)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < M, cols < N
    ss = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    up = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    ks = tl.arange(0, BLOCK_K)
    dtype = w_ptr.dtype.element_ty
    mask = row_ok[:, None] & col_ok[None, :]
    if RESIDUAL:  # loaded before the loop: its latency overlaps the matmul's
        res = tl.load(res_ptr + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x, x_ss = _x_tile(x_ptr, stride_x, rows, row_ok, k0, K, norm_w, PRE_NORM, dtype, BLOCK_K)
        ss += x_ss
        k_ok = k0 + ks < K
        w_mask = k_ok[:, None] & col_ok[None, :]
        w = tl.load(w_ptr + cols[None, :] * K + (k0 + ks)[:, None], mask=w_mask, other=0.0)  # [BLOCK_K, BLOCK_N]
        acc += _dot(x, w, IEEE)
        if SWIGLU:  # the up rows follow the N gate rows
            wu = tl.load(w_ptr + (cols + N)[None, :] * K + (k0 + ks)[:, None], mask=w_mask, other=0.0)
            up += _dot(x, wu, IEEE)
    if PRE_NORM:
        inv = 1.0 / tl.sqrt(ss / K + eps)
        acc = acc * inv[:, None]
        up = up * inv[:, None]
    if SWIGLU:  # PyTorch rounds gate and up before SiLU and the product: so do we
        g = acc.to(dtype).to(tl.float32)
        acc = (g / (1.0 + tl.exp(-g))).to(dtype).to(tl.float32) * up.to(dtype).to(tl.float32)
    if RESIDUAL:
        acc = acc.to(dtype).to(tl.float32) + res
    if BIAS:  # added to the fp32 accumulator, unrounded (the LM head's banned ids: −inf)
        acc = acc + tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :]
    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["M"])
def _qkv_kernel(
    x_ptr, w_ptr, norm_w, qk_norm, cos, sin, positions, dest_rows, q_out, k_cache, v_cache, ids, x_out,
    M, K, eps, qk_eps, stride_x,
    H: tl.constexpr, KV: tl.constexpr, HD: tl.constexpr, PRE_NORM: tl.constexpr, IEEE: tl.constexpr,
    GATHER: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    pdl.gdc(GDC)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    j = tl.program_id(1)  # head: q heads, then k heads, then v heads
    row_ok = rows < M
    src = rows
    if GATHER:  # x is the embedding table: input row r is its row ids[r], which head 0 also copies out
        src = tl.maximum(tl.load(ids + rows, mask=row_ok, other=0), 0)  # −1: a tree slot with no node
        if j == 0:
            for k0 in range(0, K, BLOCK_K):
                c = k0 + tl.arange(0, BLOCK_K)
                c_ok = row_ok[:, None] & (c < K)[None, :]
                e = tl.load(x_ptr + src[:, None] * stride_x + c[None, :], mask=c_ok, other=0.0)
                tl.store(x_out + rows[:, None] * K + c[None, :], e, mask=c_ok)
    half = tl.arange(0, HD // 2)
    ss = tl.zeros([BLOCK_M], tl.float32)
    lo = tl.zeros([BLOCK_M, HD // 2], tl.float32)  # the head's first half, then its second
    hi = tl.zeros([BLOCK_M, HD // 2], tl.float32)
    ks = tl.arange(0, BLOCK_K)
    dtype = w_ptr.dtype.element_ty
    w_head = w_ptr + j * HD * K
    # Everything the epilogue reads that does not depend on the matmul is loaded up front, so its
    # latency (positions → cos/sin rows is a chain of two) overlaps the loop instead of following it.
    ok = row_ok[:, None]
    rope = ok & (j < H + KV)  # v heads have no norm and no RoPE
    dest = tl.load(dest_rows + rows, mask=row_ok, other=0)
    pos = tl.load(positions + rows, mask=row_ok, other=0)[:, None]
    c_lo = tl.load(cos + pos * HD + half[None, :], mask=rope, other=0.0)
    c_hi = tl.load(cos + pos * HD + HD // 2 + half[None, :], mask=rope, other=0.0)
    s_lo = tl.load(sin + pos * HD + half[None, :], mask=rope, other=0.0)  # negated half of the table
    s_hi = tl.load(sin + pos * HD + HD // 2 + half[None, :], mask=rope, other=0.0)
    head_ok = (half < HD // 2) & (j < H + KV)  # the first term only gives it the vector shape
    wa = tl.load(qk_norm + j * HD + half, mask=head_ok, other=0.0).to(tl.float32)[None, :]
    wb = tl.load(qk_norm + j * HD + HD // 2 + half, mask=head_ok, other=0.0).to(tl.float32)[None, :]
    for k0 in range(0, K, BLOCK_K):
        x, x_ss = _x_tile(x_ptr, stride_x, src, row_ok, k0, K, norm_w, PRE_NORM, dtype, BLOCK_K)
        ss += x_ss
        k_ok = (k0 + ks < K)[:, None]
        w_lo = tl.load(w_head + half[None, :] * K + (k0 + ks)[:, None], mask=k_ok, other=0.0)
        w_hi = tl.load(w_head + (half + HD // 2)[None, :] * K + (k0 + ks)[:, None], mask=k_ok, other=0.0)
        lo += _dot(x, w_lo, IEEE)
        hi += _dot(x, w_hi, IEEE)
    if PRE_NORM:
        inv = 1.0 / tl.sqrt(ss / K + eps)
        lo = lo * inv[:, None]
        hi = hi * inv[:, None]
    lo = lo.to(dtype)
    hi = hi.to(dtype)
    if j < H + KV:
        a = lo.to(tl.float32)
        b = hi.to(tl.float32)
        inv_h = 1.0 / tl.sqrt((tl.sum(a * a, axis=1) + tl.sum(b * b, axis=1)) / HD + qk_eps)
        y_lo = (a * wa * c_lo + b * wb * s_lo) * inv_h[:, None]
        y_hi = (b * wb * c_hi + a * wa * s_hi) * inv_h[:, None]
        if j < H:
            base = q_out + (rows[:, None] * H + j) * HD
        else:
            base = k_cache + (dest[:, None] * KV + (j - H)) * HD
        tl.store(base + half[None, :], y_lo.to(base.dtype.element_ty), mask=ok)
        tl.store(base + HD // 2 + half[None, :], y_hi.to(base.dtype.element_ty), mask=ok)
    else:
        base = v_cache + (dest[:, None] * KV + (j - H - KV)) * HD
        tl.store(base + half[None, :], lo, mask=ok)
        tl.store(base + HD // 2 + half[None, :], hi, mask=ok)


def linear(
    x: Tensor,
    weight: Tensor,
    *,
    norm: Tensor | None = None,
    eps: float = 1e-6,
    residual: Tensor | None = None,
    swiglu: bool = False,
    bias: Tensor | None = None,
    out: Tensor | None = None,
    block_n: int = BLOCK_N,
) -> Tensor:
    """x [M, K] (rows contiguous) → [M, N]: (RMSNorm(x)·norm if `norm`)·weightᵀ, then SwiGLU
    (weight = [gate; up], N = rows / 2) or + residual [M, N] or + bias [N] (fp32, not rounded).
    out: where the result goes (its dtype, e.g. fp32 logits from bf16 weights), else a new tensor
    of the weight's dtype. block_n: output columns per program."""
    m, k = x.shape
    n = weight.shape[0] // 2 if swiglu else weight.shape[0]
    if out is None:
        out = torch.empty(m, n, dtype=weight.dtype, device=x.device)
    res = residual if residual is not None else out
    block_m = _block_m(m)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _linear_kernel[grid](
        x, weight, out, norm if norm is not None else weight, res, bias if bias is not None else out, m, n, k, eps,
        x.stride(0), out.stride(0), res.stride(0), PRE_NORM=norm is not None, SWIGLU=swiglu,
        RESIDUAL=residual is not None, BIAS=bias is not None, IEEE=weight.dtype == torch.float32,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K, num_warps=_warps(m), **pdl.options(x.device),
    )  # fmt: skip
    return out


def qkv_linear(
    x: Tensor,
    weight: Tensor,
    norm: Tensor | None,
    eps: float,
    qk_norm: Tensor,
    qk_eps: float,
    cos: Tensor,
    sin: Tensor,
    positions: Tensor,
    rows: Tensor,
    cache: Tensor,
    heads: int,
    kv_heads: int,
    ids: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """x [M, K] → q [1, M, heads, hd] (empty when heads = 0); k, v written at cache[0|1, rows].
    With `ids` [M], x is an embedding table and the input is its rows at ids: the embedding lookup
    in the same launch (one kernel fewer, and no PyTorch kernel breaking the PDL chain); those rows
    come back too, as the residual stream ([M, K]; else None).

    weight: [(heads + 2·kv_heads)·hd, K] (q rows, k rows, v rows); qk_norm: [heads + kv_heads, hd]
    per-head norm weights; cos, sin: [positions, hd] tables (sin's first half negated)."""
    m, k = (ids.shape[0], x.shape[1]) if ids is not None else x.shape
    hd = cache.shape[-1]
    q = torch.empty(1, m, heads, hd, dtype=x.dtype, device=x.device)
    rows_out = torch.empty(m, k, dtype=x.dtype, device=x.device) if ids is not None else None
    block_m = _block_m(m)
    grid = (triton.cdiv(m, block_m), heads + 2 * kv_heads)
    _qkv_kernel[grid](
        x, weight, norm if norm is not None else weight, qk_norm, cos, sin, positions, rows, q, cache[0], cache[1],
        ids if ids is not None else rows, rows_out if rows_out is not None else q,
        m, k, eps, qk_eps, x.stride(0), H=heads, KV=kv_heads, HD=hd, PRE_NORM=norm is not None,
        IEEE=weight.dtype == torch.float32, GATHER=ids is not None, BLOCK_M=block_m, BLOCK_K=QKV_BLOCK_K,
        num_warps=_warps(m), **pdl.options(x.device),
    )  # fmt: skip
    return q, rows_out
