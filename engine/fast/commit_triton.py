"""A round's commit stage in one Triton kernel instead of ~30 small PyTorch ops.

One program: the greedy walk (from the root, move to the child whose token is the target's choice;
at most block − 1 steps, each a vector compare over the T nodes), then the result row for the host
(accepted count, accepted tokens, next bonus, live node count), the accepted nodes' target features
for the drafter, the KV compaction of every layer (rows start + path[j] → start + j: all of a
layer's rows are loaded before any is stored, so overlapping moves are safe), and the state update
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
    SLICES: tl.constexpr,
    W: tl.constexpr,
    FP: tl.constexpr,
    GDC: tl.constexpr,
):
    pdl.gdc(GDC)
    idx = tl.arange(0, TP)
    live = idx < T
    tok = tl.load(tokens + idx, mask=live, other=-2).to(tl.int32)
    par = tl.load(parents + idx, mask=live, other=-1).to(tl.int32)
    j = tl.arange(0, BLOCK)
    path = tl.zeros([BLOCK], dtype=tl.int32)
    cur = 0  # unrolled loop: plain values become tensors as it goes
    going = 1
    for step in tl.static_range(1, BLOCK):
        choice = tl.load(choices + cur).to(tl.int32)
        hit = live & (idx > 0) & (par == cur) & (tok == choice)
        nxt = tl.max(tl.where(hit, idx, -1), axis=0)
        going = going & (nxt >= 0).to(tl.int32)
        cur = tl.where(going != 0, nxt, cur)
        path = tl.where((j == step) & (going != 0), nxt, path)
    count = tl.sum((path > 0).to(tl.int32), axis=0) + 1
    new_bonus = tl.load(choices + cur)
    s = tl.load(start)
    # The result row the host reads: [count, tokens of path…, bonus, live nodes].
    tl.store(result, count.to(tl.int64))
    accepted = tl.load(tokens + path)
    tl.store(result + 1 + j, accepted)
    tl.store(result + 1 + BLOCK, new_bonus)
    tl.store(result + 2 + BLOCK, tl.sum(((tok >= 0) & (idx > 0)).to(tl.int64), axis=0))
    # The accepted nodes' features become the drafter's next context.
    f = tl.arange(0, FP)
    fm = f[None, :] < F
    rowsf = tl.load(tfeats + path[:, None] * F + f[None, :], mask=fm)
    tl.store(feats + j[:, None] * F + f[None, :], rowsf, mask=fm)
    # KV compaction, every layer's K and V.
    w = tl.arange(0, W)
    for sl in tl.static_range(SLICES):
        base = kv + sl * rows * W
        moved = tl.load(base + (s + path)[:, None] * W + w[None, :])
        tl.debug_barrier()  # every source row is read before any destination row is written
        tl.store(base + (s + j)[:, None] * W + w[None, :], moved)
    tl.debug_barrier()
    tl.store(start, s + count)
    tl.store(bonus, new_bonus)
    tl.store(n_new, count.to(tl.int64))
    # The next draft pass's inputs ([block positions | context positions | block end], path.py).
    tl.store(draft_in + j, s + count + j)
    tl.store(draft_in + BLOCK + j, s + j)
    tl.store(draft_in + 2 * BLOCK, s + count + BLOCK)
    tl.store(block_ids, new_bonus)
    # The text so far, for the context lookup: the accepted tokens, then the bonus.
    tl.store(hist + s + j, accepted, mask=j < count)
    tl.store(hist + s + count, new_bonus)


def commit(
    tokens: Tensor,
    parents: Tensor,
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
    """kv: [layers, 2, rows, KV, hd] contiguous; feats: [block, F]; result: [block + 3] long;
    block_ids [block] (its first id becomes the bonus) and draft_in [2·block + 1] long: the next
    draft pass's inputs (FastPath.draft_in); hist [rows] long: the text, hist[start] the bonus."""
    t, f = tokens.shape[0], tfeats.shape[1]
    layers, two, rows, kvh, hd = kv.shape
    _commit_kernel[(1,)](
        tokens, parents, choices, tfeats, kv, feats, result, start, bonus, n_new, block_ids, draft_in, hist, rows, f,
        T=t, TP=triton.next_power_of_2(t), BLOCK=block, SLICES=layers * two, W=kvh * hd,
        FP=triton.next_power_of_2(max(f, 1)), num_warps=4, **pdl.options(kv.device),
    )  # fmt: skip


@triton.jit
def _commit_one_kernel(
    logits, choices, result, start, bonus, V, BLOCK: tl.constexpr, VP: tl.constexpr, GDC: tl.constexpr
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
    tl.store(result + BLOCK + 1, c)
    tl.store(bonus, c)
    tl.store(start, tl.load(start) + 1)


def commit_one(logits: Tensor, choices: Tensor, result: Tensor, start: Tensor, bonus: Tensor, block: int) -> None:
    """ar's step after the LM head in one launch, not six: the argmax of logits [1, V] (into
    choices [1]), and the commit (the one node is accepted, its choice is the next bonus)."""
    v = logits.shape[-1]
    _commit_one_kernel[(1,)](
        logits, choices, result, start, bonus, v, BLOCK=block, VP=triton.next_power_of_2(v), num_warps=4,
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
