"""The DDTree build's depth loop in one Triton kernel instead of ~100 small PyTorch ops.

Same algorithm as `tree_ops.build_tree` (read its docstring first). After log-softmax and top-K
(PyTorch: its radix select beat a full in-register sort of the vocabulary, 85 µs, on the H200),
`_depths_kernel`, one program, runs the depth loop (gather the parents' scores, add the child
log-probabilities, sort the ~B·ln B candidate pairs as (score, index) packed into int64 keys,
keep the best B) and the final merge of the L·B survivors into pop order, with the per-depth
results in global scratch between `debug_barrier`s (one CTA, so a barrier orders them).
Scores are float32 here (float64 in the PyTorch version), so on exact or near ties (~1e-7) the two
may order nodes differently; both trees are valid and the walk stays lossless. Ties keep the
PyTorch version's order: shallower first, then better parent, then better rank.
The tree's ancestor matrix and token lookup reuse `tree_ops.assemble`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from engine.fast import tree_ops


@triton.jit
def _pack(x, idx, n: tl.constexpr):
    """float32 score + index → int64 key: larger score first, then smaller index, under a descending sort."""
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # monotone in the float's value, as a signed int
    return (key.to(tl.int64) << 32) | (n - 1 - idx).to(tl.int64)


@triton.jit
def _unpack_value(packed):
    key = (packed >> 32).to(tl.int32)
    return (key ^ ((key >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def _unpack_index(packed, n: tl.constexpr):
    return n - 1 - (packed & 0xFFFFFFFF).to(tl.int32)


@triton.jit
def _depths_kernel(
    lp,
    pair_parent,
    pair_rank,
    score,
    pick,
    order,
    L,
    K,
    C,
    B: tl.constexpr,
    BP: tl.constexpr,
    CP: tl.constexpr,
    NP: tl.constexpr,
):
    b = tl.arange(0, BP)
    tl.store(score + b, tl.load(lp + b, mask=(b < K) & (b < B), other=float("-inf")), mask=b < B)
    tl.store(pick + b, b, mask=b < B)
    c = tl.arange(0, CP)
    cm = c < C
    parent = tl.load(pair_parent + c, mask=cm, other=0)
    rank = tl.load(pair_rank + c, mask=cm, other=0)
    for d in range(1, L):
        tl.debug_barrier()  # depth d − 1's scores are written
        cand = tl.load(score + (d - 1) * B + parent, mask=cm, other=float("-inf"))
        cand = cand + tl.load(lp + d * K + rank, mask=cm, other=float("-inf"))
        cand = tl.where(cm, cand, float("-inf"))
        srt = tl.sort(_pack(cand, c, CP), descending=True)
        tl.store(score + d * B + c, _unpack_value(srt), mask=c < B)
        tl.store(pick + d * B + c, _unpack_index(srt, CP), mask=c < B)
    tl.debug_barrier()
    n = tl.arange(0, NP)
    flat = tl.load(score + n, mask=n < L * B, other=float("-inf"))
    srt = tl.sort(_pack(flat, n, NP), descending=True)
    tl.store(order + n, _unpack_index(srt, NP), mask=n < B)


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(n, 16))


class TritonTree:
    """Static scratch for one plan; `build` is capturable in a CUDA graph."""

    def __init__(self, plan: tree_ops.TreePlan, vocab: int, device: torch.device) -> None:
        self.plan, self.vocab = plan, vocab
        b, k, depth = plan.budget, plan.k, plan.depth_limit
        self.pair_parent = plan.parent_pos.to(torch.int32)
        self.pair_rank = plan.rank.to(torch.int32)
        self.top_ids = torch.zeros(depth, k, dtype=torch.long, device=device)
        self.top_lp = torch.zeros(depth, k, dtype=torch.float32, device=device)
        self.score = torch.zeros(depth * b, dtype=torch.float32, device=device)
        self.pick = torch.zeros(depth * b, dtype=torch.int32, device=device)
        self.order = torch.zeros(b, dtype=torch.int32, device=device)

    def build(self, root: Tensor, logits: Tensor) -> tree_ops.DeviceTree:
        """root: long [1]; logits: float32 [L, V], banned ids already −inf."""
        p = self.plan
        b, k, depth = p.budget, p.k, p.depth_limit
        top = torch.log_softmax(logits, -1).topk(k, dim=-1)  # a radix select: faster than a full sort here
        self.top_ids.copy_(top.indices)
        self.top_lp.copy_(top.values)
        c = self.pair_parent.shape[0]
        _depths_kernel[(1,)](
            self.top_lp, self.pair_parent, self.pair_rank, self.score, self.pick, self.order, depth, k, c,
            B=b, BP=_pow2(b), CP=_pow2(c), NP=_pow2(depth * b), num_warps=8,
        )  # fmt: skip
        pick = self.pick.view(depth, b).long()
        ranks = torch.cat([p.first_rank[None], p.rank[pick[1:]]]).view(-1)
        parent_pos = torch.cat([torch.zeros_like(p.first_rank)[None], p.parent_pos[pick[1:]]]).view(-1)
        return tree_ops.assemble(p, root, self.top_ids, self.score, ranks, parent_pos, self.order.long())
