"""A round's commit stage in one Triton kernel instead of ~30 small PyTorch ops.

One program: the greedy walk (a node is accepted when its token and all its ancestors' are their
parents' choices: ancestors by pointer doubling, log2(span) gathers over the T nodes instead of one
step per depth; span = the longest path, a block or a longer lookup branch), then the result row
for the host (accepted count, accepted tokens, next bonus, live node count), the accepted nodes'
target features for the drafter, the KV compaction of every layer (rows start + path[j] → start + j,
16 path rows at a time, in order: see the kernel for why overlapping moves are safe), and the state update
(start += count, the new bonus) with the next draft pass's inputs (block positions, context
positions, the block's end row, the bonus as the block's first id). Same results as
`tree_ops.walk` + `tree_ops.compact` + the PyTorch commit in `path.py`, which stays the CPU path
and the reference.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from engine.kernels import pdl


@triton.jit
def _commit_kernel(
    tokens,
    parents,
    depths,
    choices,
    tfeats,
    kv,
    feats,
    result,
    start,
    bonus,
    n_new,
    block_ids,
    draft_in,
    hist,
    rows,
    F,
    T: tl.constexpr,
    TP: tl.constexpr,
    BLOCK: tl.constexpr,
    SPAN: tl.constexpr,
    LOG: tl.constexpr,
    CH: tl.constexpr,
    SLICES: tl.constexpr,
    W: tl.constexpr,
    FP: tl.constexpr,
    GDC: tl.constexpr,
):
    pdl.gdc(GDC)
    idx = tl.arange(0, TP)
    live = idx < T
    tok = tl.load(tokens + idx, mask=live, other=-2).to(tl.int32)
    par = tl.maximum(tl.load(parents + idx, mask=live, other=0).to(tl.int32), 0)  # the root's: itself
    dep = tl.load(depths + idx, mask=live, other=0).to(tl.int32)
    # ok[i]: node i and its ancestors up to 2^k levels up are accepted (matched their parent's choice);
    # up[i]: its ancestor 2^k levels up (the root above the root). After LOG doublings, 2^LOG ≥ span
    # levels: the whole path. Siblings hold distinct tokens, so one node per depth survives.
    ok = (live & ((idx == 0) | (tok == tl.load(choices + par, mask=live, other=-1).to(tl.int32)))).to(tl.int32)
    up = par
    for _ in tl.static_range(LOG):
        ok = ok & tl.gather(ok, up, 0)
        up = tl.gather(up, up, 0)
    j = tl.arange(0, SPAN)
    path = tl.max(tl.where((ok[None, :] != 0) & (dep[None, :] == j[:, None]), idx[None, :], 0), axis=1)  # at depth j
    count = tl.sum(ok, axis=0)
    cur = tl.max(tl.where(ok != 0, dep * TP + idx, 0), axis=0) % TP  # the deepest accepted node
    new_bonus = tl.load(choices + cur)
    s = tl.load(start)
    # The result row the host reads: [count, tokens of path…, bonus, live nodes].
    tl.store(result, count.to(tl.int64))
    accepted = tl.load(tokens + path)
    tl.store(result + 1 + j, accepted)
    tl.store(result + 1 + SPAN, new_bonus)
    tl.store(result + 2 + SPAN, tl.sum(((tok >= 0) & (idx > 0)).to(tl.int64), axis=0))
    # The accepted nodes' features become the drafter's next context, and the KV compaction of every
    # layer's K and V, CH path rows at a time (a long lookup path would not fit in registers). In
    # order: path[j] >= j (a node's index is at least its depth), so a chunk only overwrites rows that
    # no later chunk reads; within a chunk every source row is read before any is written.
    f = tl.arange(0, FP)
    fm = f[None, :] < F
    w = tl.arange(0, W)
    jc = tl.arange(0, CH)
    for c0 in tl.static_range(0, SPAN, CH):
        if c0 < count:  # a chunk wholly past the accepted path would move scratch only: skipped
            pc = tl.sum(tl.where(j[None, :] == (c0 + jc)[:, None], path[None, :], 0), axis=1)  # path[c0:c0 + CH]
            rowsf = tl.load(tfeats + pc[:, None] * F + f[None, :], mask=fm)
            tl.store(feats + (c0 + jc)[:, None] * F + f[None, :], rowsf, mask=fm)
            for sl in tl.static_range(SLICES):
                base = kv + sl * rows * W
                moved = tl.load(base + (s + pc)[:, None] * W + w[None, :])
                tl.debug_barrier()
                tl.store(base + (s + c0 + jc)[:, None] * W + w[None, :], moved)
    tl.debug_barrier()
    tl.store(start, s + count)
    tl.store(bonus, new_bonus)
    tl.store(n_new, count.to(tl.int64))
    # The next draft pass's inputs ([block positions | context positions | block end], path.py).
    b = tl.arange(0, BLOCK)
    tl.store(draft_in + b, s + count + b)
    tl.store(draft_in + BLOCK + j, s + j)
    tl.store(draft_in + BLOCK + SPAN, s + count + BLOCK)
    tl.store(block_ids, new_bonus)
    # The text so far, for the context lookup: the accepted tokens, then the bonus.
    tl.store(hist + s + j, accepted, mask=j < count)
    tl.store(hist + s + count, new_bonus)


def commit(
    tokens: Tensor,
    parents: Tensor,
    depths: Tensor,
    choices: Tensor,
    tfeats: Tensor,
    kv: Tensor,
    feats: Tensor,
    result: Tensor,
    start: Tensor,
    bonus: Tensor,
    n_new: Tensor,
    block_ids: Tensor,
    draft_in: Tensor,
    hist: Tensor,
    block: int,
) -> None:
    """kv: [layers, 2, rows, KV, hd] contiguous; feats: [span, F]; result: [span + 3] long, span (a
    power of two) the longest path; block_ids [block] (its first id becomes the bonus) and draft_in
    [block + span + 1] long: the next draft pass's inputs (FastPath.draft_in); hist [rows] long: the
    text, hist[start] the bonus."""
    t, f = tokens.shape[0], tfeats.shape[1]
    span = feats.shape[0]
    layers, two, rows, kvh, hd = kv.shape
    _commit_kernel[(1,)](
        tokens, parents, depths, choices, tfeats, kv, feats, result, start, bonus, n_new, block_ids, draft_in, hist,
        rows, f, T=t, TP=triton.next_power_of_2(t), BLOCK=block, SPAN=span, LOG=max(1, (span - 1).bit_length()),
        CH=min(span, 16), SLICES=layers * two, W=kvh * hd,
        FP=triton.next_power_of_2(max(f, 1)), num_warps=4, **pdl.options(kv.device),
    )  # fmt: skip


@triton.jit
def _commit_one_kernel(
    logits, choices, result, start, bonus, V, SPAN: tl.constexpr, VP: tl.constexpr, GDC: tl.constexpr
):
    pdl.gdc(GDC)
    cols = tl.arange(0, VP)
    # The greedy choice here rather than in a separate argmax launch; ties go to the lowest id, as in
    # torch.argmax.
    c = tl.argmax(tl.load(logits + cols, mask=cols < V, other=float("-inf")), 0).to(tl.int64)
    b = tl.load(bonus)
    tl.store(choices, c)
    tl.store(result, tl.full((), 1, tl.int64))
    tl.store(result + 1, b)
    tl.store(result + SPAN + 1, c)
    tl.store(bonus, c)
    tl.store(start, tl.load(start) + 1)


def commit_one(logits: Tensor, choices: Tensor, result: Tensor, start: Tensor, bonus: Tensor, span: int) -> None:
    """ar's step after the LM head in one launch, not six: the argmax of logits [1, V] (into
    choices [1]), and the commit (the one node is accepted, its choice is the next bonus) into the
    result row [span + 3]."""
    v = logits.shape[-1]
    _commit_one_kernel[(1,)](
        logits, choices, result, start, bonus, v, SPAN=span, VP=triton.next_power_of_2(v), num_warps=4,
        **pdl.options(logits.device),
    )  # fmt: skip


@triton.jit
def _choices_kernel(logits, choices, V, VP: tl.constexpr, GDC: tl.constexpr):
    pdl.gdc(GDC)
    r = tl.program_id(0)
    cols = tl.arange(0, VP)
    row = tl.load(logits + r * V + cols, mask=cols < V, other=float("-inf"))
    tl.store(choices + r, tl.argmax(row, 0).to(tl.int64))


def choices(logits: Tensor, out: Tensor) -> None:
    """out [T] = the argmax of each row of logits [T, V] (contiguous), ties to the lowest id as in
    torch.argmax: the tree pass's greedy choices, one program per row (torch.argmax over 65 × 4096
    logits took 14 µs on the H200)."""
    t, v = logits.shape
    _choices_kernel[(t,)](logits, out, v, VP=triton.next_power_of_2(v), num_warps=4, **pdl.options(logits.device))
