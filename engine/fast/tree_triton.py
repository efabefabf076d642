"""The DDTree build in five Triton kernels instead of ~120 small PyTorch ops.

Same algorithm as `tree_ops.build_tree` (read its docstring first).
- `_vocab_chunk_kernel` and `_vocab_merge_kernel`: log-softmax and top-K of every depth's logits,
  as a bitonic top-k per vocabulary chunk and a merge of the chunks' winners per depth (on the H200
  PyTorch's softmax + radix-select top-K took ~31 µs of a B = 64 round; a full in-register sort of the
  vocabulary, 85 µs).
- `_depths_kernel`, one program, runs the depth loop (gather the parents' scores, add the child
  log-probabilities, take the best B of the ~B·ln B candidate pairs, as (score, index) packed into
  int64 keys, with a bitonic top-k; the survivors' scores go from depth to depth in registers through
  `tl.gather`) and the final top-B merge of the L·B survivors into pop order, which reads every
  depth's results back from global scratch after a `debug_barrier` (one CTA, so the barrier orders
  them).
- `_node_of_kernel` inverts the pop order and `_assemble_kernel`, one program per node, writes its
  token, parent, depth and ancestor row (walking up the survivors' parent links) straight into the
  decoder's static tree buffers.
- `_graft_kernel` (`TritonTree.graft`, with the decoder's `lookup`): one program finds the context
  match in the text and grafts its continuation after the B nodes (`tree_ops.graft`).
Speed: `python -m engine.fast.bench_tree`.
Scores are float32 here (float64 in the PyTorch version), so on exact or near ties (~1e-7) the two
may order nodes differently; both trees are valid and the walk stays lossless. Ties keep the
PyTorch version's order: shallower first, then better parent, then better rank; among equal
log-probabilities of one depth the smaller token id ranks first (PyTorch's top-K leaves that open).
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
    """float32 score + index → int64 key: larger score first, then smaller index, as the largest key first."""
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
def _vocab_chunk_kernel(
    logits, keys, chunk_max, chunk_sum, V, CH: tl.constexpr, S: tl.constexpr, KP: tl.constexpr, GDC: tl.constexpr
):
    """Program (depth d, chunk c): the best KP of the chunk's CH logits as packed keys, and the chunk's
    max and sum of exp(x − max), for the row's log-sum-exp."""
    pdl.gdc(GDC)
    d = tl.program_id(0)
    c = tl.program_id(1)
    v = c * CH + tl.arange(0, CH)
    x = tl.load(logits + d * V + v, mask=v < V, other=float("-inf"))
    m = tl.max(x, axis=0)
    e = tl.where(x > float("-inf"), tl.exp(x - m), 0.0)  # an all-banned chunk sums to 0, not NaN
    tl.store(chunk_max + d * S + c, m)
    tl.store(chunk_sum + d * S + c, tl.sum(e, axis=0))
    tl.store(keys + (d * S + c) * KP + tl.arange(0, KP), tl.topk(_pack(x, v, S * CH), KP))


@triton.jit
def _vocab_merge_kernel(
    keys, chunk_max, chunk_sum, top_lp, top_ids, K, S: tl.constexpr, KP: tl.constexpr, N: tl.constexpr,
    GDC: tl.constexpr,
):  # fmt: skip
    """Program d: the best K of depth d's S·KP chunk winners, as log-probabilities and token ids."""
    pdl.gdc(GDC)
    d = tl.program_id(0)
    top = tl.topk(tl.load(keys + d * S * KP + tl.arange(0, S * KP)), KP)
    cm = tl.load(chunk_max + d * S + tl.arange(0, S))
    big = tl.max(cm, axis=0)
    total = tl.sum(tl.load(chunk_sum + d * S + tl.arange(0, S)) * tl.exp(cm - big), axis=0)
    r = tl.arange(0, KP)
    tl.store(top_lp + d * K + r, (_unpack_value(top) - big) - tl.log(total), mask=r < K)
    tl.store(top_ids + d * K + r, _unpack_index(top, N).to(tl.int64), mask=r < K)


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
    GDC: tl.constexpr,
):
    pdl.gdc(GDC)
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
    # The survivors' scores stay in registers from depth to depth (best first): a register gather
    # instead of a store, a barrier and a load on every depth's critical path.
    prev = tl.load(lp + b, mask=(b < K) & (b < B), other=float("-inf"))
    for d in range(1, L):
        cand = tl.gather(prev, parent, 0) + tl.load(lp + d * K + rank, mask=cm, other=float("-inf"))
        cand = tl.where(cm, cand, float("-inf"))
        # Only the best B of the ~B·ln B candidates go on: a bitonic top-k, sorted, does ~40 % less
        # compare-and-swap work than sorting them all.
        top = tl.topk(_pack(cand, c, CP), BP)
        prev = _unpack_value(top)
        tl.store(score + d * B + b, prev, mask=b < B)
        tl.store(pick + d * B + b, _unpack_index(top, CP), mask=b < B)
    tl.debug_barrier()  # every depth's scores are written
    n = tl.arange(0, NP)
    flat = tl.load(score + n, mask=n < L * B, other=float("-inf"))
    tl.store(order + b, _unpack_index(tl.topk(_pack(flat, n, NP), BP), NP), mask=b < B)


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
    with PACK also the row as the tree-attention kernel's int32 bit words (`pack_tree_mask`). N: the
    buffers' node count (1 + B, or more with a lookup branch after the B nodes)."""
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


@triton.jit
def _graft_kernel(
    hist, start, tokens, parents, depths, visible, packed, ROWS,
    B: tl.constexpr, N: tl.constexpr, NP: tl.constexpr, L: tl.constexpr, LP: tl.constexpr, LOG: tl.constexpr,
    NGRAM: tl.constexpr, CH: tl.constexpr, PACK: tl.constexpr, GDC: tl.constexpr,
):  # fmt: skip
    """One program: the latest longest earlier match of the text's last NGRAM tokens (hist[start] is the
    bonus), then its continuation grafted onto the tree as `tree_ops.graft` does, without a step per
    depth: a drafted node is on the branch when its token and all its ancestors' are the
    continuation's at their depths (ancestors by pointer doubling: LOG gathers, 2^LOG levels, more than the
    drafted depth); below the deepest such node the branch's new nodes are a run of slots (a new node has no
    children yet, so every later one is new too), written as one vector, all L slots in one pass."""
    pdl.gdc(GDC)
    last = tl.load(start)
    best = tl.full((), -1, tl.int64)
    for c0 in range(0, last, CH):  # key = match length · ROWS + match end: longest, then latest
        e = c0 + tl.arange(0, CH).to(tl.int64)
        run = e < last
        m = tl.zeros([CH], dtype=tl.int64)
        for k in tl.static_range(NGRAM):
            run = run & (e >= k)
            a = tl.load(hist + e - k, mask=run, other=-1)
            run = run & (a == tl.load(hist + last - k, mask=last >= k, other=-2))
            m += run.to(tl.int64)
        best = tl.maximum(best, tl.max(tl.where(m > 0, m * ROWS + e, -1), axis=0))
    idx = tl.arange(0, NP)
    tok = tl.load(tokens + idx, mask=idx <= B, other=-1)
    par = tl.maximum(tl.load(parents + idx, mask=idx <= B, other=0), 0).to(tl.int32)  # the root's: itself
    dep = tl.load(depths + idx, mask=idx <= B, other=1).to(tl.int32)
    end = best % ROWS
    period = tl.maximum(last - end, 1)  # past the text's end the continuation loops
    alive = best >= 0
    # ok[i]: drafted node i and its ancestors up to 2^k levels up carry the continuation's tokens.
    mine = alive & (idx > 0) & (idx <= B) & (dep <= L)
    want = tl.load(hist + end + 1 + (dep - 1) % period, mask=mine, other=-1)
    ok = ((idx == 0) | (mine & (tok == want))).to(tl.int32)
    up = par
    for _ in tl.static_range(LOG):
        ok = ok & tl.gather(ok, up, 0)
        up = tl.gather(up, up, 0)
    row = ok != 0  # the branch's drafted nodes, the root included
    deepest = tl.max(tl.where(row, dep * NP + idx, 0), axis=0)
    node, reached = deepest % NP, deepest // NP
    # The new nodes: the k-th in slot B + 1 + k, at depth reached + 1 + k, under the one before it.
    k = idx - (B + 1)
    here = alive & (k >= 0) & (k < L - reached)
    tok = tl.where(here, tl.load(hist + end + 1 + (reached + k) % period, mask=here, other=-1), tok)
    par = tl.where(here, tl.where(k == 0, node, idx - 1), par)
    dep = tl.where(here, reached + 1 + k, dep)
    used = tl.where(alive, L - reached, 0)
    slot = (idx > B) & (idx < N)
    tl.store(tokens + idx, tok, mask=slot)  # unused slots: token −1 (never matched), root as parent, depth 1
    tl.store(parents + idx, par, mask=slot)
    tl.store(depths + idx, dep, mask=slot)
    # Slot j's ancestor row: a new node sees the path's drafted nodes and the new ones up to itself;
    # an unused slot, the root and itself.
    j = tl.arange(0, LP)[:, None]
    c = idx[None, :]
    base = (row & (idx <= B))[None, :]
    rows = tl.where(j < used, base | ((c > B) & (c <= B + 1 + j)), (c == 0) | (c == B + 1 + j))
    tl.store(visible + (B + 1 + j) * N + c, rows.to(tl.int1), mask=(j < L) & (c < N))
    if PACK:
        words = tl.sum(tl.reshape(rows.to(tl.int32) << (c % 32), [LP, NP // 32, 32]), axis=2)
        w = tl.arange(0, NP // 32)[None, :]
        tl.store(packed + (B + 1 + j) * ((N + 31) // 32) + w, words, mask=(j < L) & (w < (N + 31) // 32))


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(n, 16))


def _graft_shape(n: int) -> tuple[int, int]:
    """(lanes, warps) of the graft's program for n tree slots: one lane per thread, at least 128. On the
    H200 (B = 16 / 32 / 64, L = 31) the program took 5.4 µs on 128 lanes and 4 warps, but 17.8 µs on
    64 lanes and 4 warps or 128 and 8 (more threads than lanes: the gathers' slow path), 7.5 on 64 and 2."""
    lanes = max(128, _pow2(n))
    return lanes, min(8, lanes // 32)


def _depth_warps(budget: int) -> int:
    # The whole build on the H200 (µs, `TreePlan`'s (p + 1)(r + 2) ≤ B pairs, on 2 / 4 / 8 / 16 warps):
    # B = 16: 18.0 / 17.3 / 18.6 / 20.3; B = 32: 28.0 / 23.2 / 24.8 / 27.7; B = 64 (256 candidates):
    # 57.7 / 42.7 / 37.1 / 42.2; B = 128 (1024): 190 / 140 / 103 / 98.6 (more threads share the wider top-k).
    return 4 if budget <= 32 else 8 if budget <= 64 else 16


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
        # The vocabulary's top K per depth in two steps: chunks of CH ids keep their best KP (a power of
        # two ≥ K), then one program per depth merges the chunks' winners. Chunks of ≥ 4·KP ids keep
        # the merge at ≤ 1024 candidates for a 4096-id vocabulary.
        kp = _pow2(k)
        ch = min(_pow2(vocab), max(256, 4 * kp))
        chunks = _pow2(vocab) // ch
        self.vocab_tiles = (kp, ch, chunks)
        self.chunk_keys = torch.zeros(depth, chunks * kp, dtype=torch.int64, device=device)
        self.chunk_max = torch.zeros(depth, chunks, dtype=torch.float32, device=device)
        self.chunk_sum = torch.zeros(depth, chunks, dtype=torch.float32, device=device)
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
        launch = pdl.options(logits.device)  # each kernel after the first starts while the one before ends
        kp, ch, chunks = self.vocab_tiles
        _vocab_chunk_kernel[(depth, chunks)](
            logits, self.chunk_keys, self.chunk_max, self.chunk_sum, self.vocab, CH=ch, S=chunks, KP=kp, num_warps=4,
            **launch,
        )  # fmt: skip
        _vocab_merge_kernel[(depth,)](
            self.chunk_keys, self.chunk_max, self.chunk_sum, self.top_lp, self.top_ids, k, S=chunks, KP=kp,
            N=chunks * ch, num_warps=4, **launch,
        )  # fmt: skip
        c = p.pairs  # (the padding past them is masked to −inf in the kernel)
        _depths_kernel[(1,)](
            self.top_lp, self.pair_parent, self.pair_rank, self.score, self.pick, self.order, depth, k, c,
            B=b, BP=_pow2(b), CP=_pow2(max(c, b)), NP=_pow2(depth * b), num_warps=_depth_warps(b), **launch,
        )  # fmt: skip
        _node_of_kernel[(1,)](self.order, self.node_of, B=b, BP=_pow2(b), num_warps=4, **launch)
        out = self.out
        packed = self.packed
        n = out.tokens.shape[0]
        _assemble_kernel[(b + 1,)](
            root, self.order, self.node_of, self.score, self.pick, self.pair_parent, self.pair_rank, self.top_ids,
            out.tokens, out.parents, out.depths, out.visible, packed if packed is not None else out.visible, k, B=b,
            N=n, NP=max(32, _pow2(n)), PACK=packed is not None, num_warps=2, **launch,
        )  # fmt: skip
        return out

    def graft(self, hist: Tensor, start: Tensor, ngram: int) -> tree_ops.DeviceTree:
        """`tree_ops.context_chain` + `tree_ops.graft` in one program, after `build`: the out buffers'
        nodes past 1 + B are the lookup branch's slots."""
        out, packed, b = self.out, self.packed, self.plan.budget
        n = out.tokens.shape[0]
        if n <= b + 1:
            raise ValueError(f"no lookup slots: the tree buffers hold {n} nodes for a budget of {b}")
        bits = packed if packed is not None else out.visible
        lanes, warps = _graft_shape(n)
        _graft_kernel[(1,)](
            hist, start, out.tokens, out.parents, out.depths, out.visible, bits, hist.shape[0], B=b, N=n,
            NP=lanes, L=n - 1 - b, LP=_pow2(n - 1 - b), LOG=max(1, self.plan.depth_limit.bit_length()), NGRAM=ngram,
            CH=1024, PACK=packed is not None, num_warps=warps, **pdl.options(hist.device),
        )  # fmt: skip
        return out
