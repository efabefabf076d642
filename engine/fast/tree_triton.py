"""The DDTree build in three Triton kernels instead of ~120 small PyTorch ops.

Same algorithm as `tree_ops.build_tree` (read its docstring first). After log-softmax and top-K
(PyTorch: its radix select beat a full in-register sort of the vocabulary, 85 µs, on the H200),
`_depths_kernel`, one program, runs the depth loop (gather the parents' scores, add the child
log-probabilities, sort the ~B·ln B candidate pairs as (score, index) packed into int64 keys,
keep the best B; the survivors' scores go from depth to depth in registers through `tl.gather`) and
the final merge of the L·B survivors into pop order, which reads every depth's results back from
global scratch after a `debug_barrier` (one CTA, so the barrier orders them). Then
`_node_of_kernel` inverts the pop order and `_assemble_kernel`, one program per node, writes its
token, parent, depth and ancestor row (walking up the survivors' parent links) straight into the
decoder's static tree buffers.
Speed: `python -m engine.fast.bench_tree`.
Scores are float32 here (float64 in the PyTorch version), so on exact or near ties (~1e-7) the two
may order nodes differently; both trees are valid and the walk stays lossless. Ties keep the
PyTorch version's order: shallower first, then better parent, then better rank.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from engine.fast import tree_ops
from engine.kernels import pdl


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
    tl.store(
        score + b,
        tl.load(lp + b, mask=(b < K) & (b < B), other=float("-inf")),
        mask=b < B,
    )
    tl.store(pick + b, b, mask=b < B)
    c = tl.arange(0, CP)
    cm = c < C
    parent = tl.load(pair_parent + c, mask=cm, other=0)
    rank = tl.load(pair_rank + c, mask=cm, other=0)
    # The survivors' scores stay in registers from depth to depth (their first B entries, best first):
    # a register gather instead of a store, a barrier and a load on every depth's critical path.
    prev = tl.load(lp + c, mask=(c < K) & (c < B), other=float("-inf"))
    for d in range(1, L):
        cand = tl.gather(prev, parent, 0) + tl.load(lp + d * K + rank, mask=cm, other=float("-inf"))
        cand = tl.where(cm, cand, float("-inf"))
        srt = tl.sort(_pack(cand, c, CP), descending=True)
        prev = _unpack_value(srt)
        tl.store(score + d * B + c, prev, mask=c < B)
        tl.store(pick + d * B + c, _unpack_index(srt, CP), mask=c < B)
    tl.debug_barrier()  # every depth's scores are written
    n = tl.arange(0, NP)
    flat = tl.load(score + n, mask=n < L * B, other=float("-inf"))
    srt = tl.sort(_pack(flat, n, NP), descending=True)
    tl.store(order + n, _unpack_index(srt, NP), mask=n < B)


@triton.jit
def _node_of_kernel(order, node_of, B: tl.constexpr, BP: tl.constexpr, GDC: tl.constexpr):
    pdl.gdc(GDC)
    i = tl.arange(0, BP)
    flat = tl.load(order + i, mask=i < B, other=0)
    tl.store(node_of + flat, i + 1, mask=i < B)


@triton.jit
def _assemble_kernel(
    root,
    order,
    node_of,
    score,
    pick,
    pair_parent,
    pair_rank,
    top_ids,
    tokens,
    parents,
    depths,
    visible,
    packed,
    K,
    B: tl.constexpr,
    N: tl.constexpr,
    NP: tl.constexpr,
    PACK: tl.constexpr,
    GDC: tl.constexpr,
):
    """One program per node i (0 = root): its token, parent, depth and ancestor row, from `order`;
    with PACK also the row as the tree-attention kernel's int32 bit words (`pack_tree_mask`)."""
    pdl.gdc(GDC)
    i = tl.program_id(0)
    cols = tl.arange(0, NP)
    row = (cols == 0) | (cols == i)
    if i == 0:
        tl.store(tokens, tl.load(root))
        tl.store(parents, tl.zeros((), dtype=tl.int64))
        tl.store(depths, tl.zeros((), dtype=tl.int64))
    else:
        f = tl.load(order + i - 1)
        d0 = f // B
        deep = d0 > 0
        p = tl.load(pick + f)
        rank = tl.where(deep, tl.load(pair_rank + p, mask=deep, other=0), tl.minimum(f, K - 1))
        exists = tl.load(score + f) > float("-inf")
        tl.store(tokens + i, tl.where(exists, tl.load(top_ids + d0 * K + rank), -1))
        tl.store(depths + i, (d0 + 1).to(tl.int64))
        up = (d0 - 1) * B + tl.load(pair_parent + p, mask=deep, other=0)
        tl.store(
            parents + i,
            tl.where(deep, tl.load(node_of + up, mask=deep, other=0), 0).to(tl.int64),
        )
        # Walk up the survivors' parent links; each ancestor's node index comes from node_of.
        a = f
        da = d0
        while da > 0:
            a = (da - 1) * B + tl.load(pair_parent + tl.load(pick + a))
            da -= 1
            row = row | (cols == tl.load(node_of + a))
    tl.store(visible + i * N + cols, row.to(tl.int1), mask=cols < N)
    if PACK:  # distinct bits: their int32 sum is their bitwise or (bit 31 included)
        words = tl.sum(tl.reshape(row.to(tl.int32) << (cols % 32), [NP // 32, 32]), axis=1)
        w = tl.arange(0, NP // 32)
        tl.store(packed + i * ((N + 31) // 32) + w, words, mask=w < (N + 31) // 32)


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(n, 16))


class TritonTree:
    """Static scratch for one plan; `build` is capturable in a CUDA graph."""

    def __init__(
        self,
        plan: tree_ops.TreePlan,
        vocab: int,
        device: torch.device,
        out: tree_ops.DeviceTree | None = None,
        packed: Tensor | None = None,
    ) -> None:
        """out: where the tree goes (the decoder's static tree buffers), else fresh tensors; packed
        (int32 [1+B, ceil((1+B) / 32)]): where the packed ancestor mask goes, if anywhere."""
        self.plan, self.vocab = plan, vocab
        b, k, depth = plan.budget, plan.k, plan.depth_limit
        self.pair_parent = plan.parent_pos.to(torch.int32)
        self.pair_rank = plan.rank.to(torch.int32)
        self.top_ids = torch.zeros(depth, k, dtype=torch.long, device=device)
        self.top_lp = torch.zeros(depth, k, dtype=torch.float32, device=device)
        self.score = torch.zeros(depth * b, dtype=torch.float32, device=device)
        self.pick = torch.zeros(depth * b, dtype=torch.int32, device=device)
        self.order = torch.zeros(b, dtype=torch.int32, device=device)
        self.node_of = torch.zeros(depth * b, dtype=torch.int32, device=device)
        n = b + 1
        self.packed = packed
        self.out = out or tree_ops.DeviceTree(
            torch.zeros(n, dtype=torch.long, device=device),
            torch.zeros(n, dtype=torch.long, device=device),
            torch.zeros(n, dtype=torch.long, device=device),
            torch.zeros(n, n, dtype=torch.bool, device=device),
        )

    def build(self, root: Tensor, logits: Tensor) -> tree_ops.DeviceTree:
        """root: long [1]; logits: float32 [L, V], banned ids already −inf."""
        p = self.plan
        b, k, depth = p.budget, p.k, p.depth_limit
        # A radix select (faster than a full sort here), straight into the static buffers.
        torch.topk(torch.log_softmax(logits, -1), k, dim=-1, out=(self.top_lp, self.top_ids))
        c = self.pair_parent.shape[0]
        _depths_kernel[(1,)](
            self.top_lp, self.pair_parent, self.pair_rank, self.score, self.pick, self.order, depth, k, c,
            B=b, BP=_pow2(b), CP=_pow2(c), NP=_pow2(depth * b), num_warps=8,
        )  # fmt: skip
        launch = pdl.options(logits.device)  # the two kernels after the first start while it ends
        _node_of_kernel[(1,)](self.order, self.node_of, B=b, BP=_pow2(b), num_warps=4, **launch)
        n = b + 1
        out = self.out
        packed = self.packed
        _assemble_kernel[(n,)](
            root, self.order, self.node_of, self.score, self.pick, self.pair_parent, self.pair_rank, self.top_ids,
            out.tokens, out.parents, out.depths, out.visible, packed if packed is not None else out.visible, k, B=b,
            N=n, NP=max(32, _pow2(n)), PACK=packed is not None, num_warps=2, **launch,
        )  # fmt: skip
        return out
