"""The fast path: greedy rounds entirely on the device, replayed as CUDA graphs.

State that survives between rounds lives in device tensors (committed length `start`, the bonus
token, the features of the last committed tokens, both K/V caches), so a round needs nothing
from the host: it is one graph replay, and the host reads one small result tensor (accepted
count, accepted tokens, next bonus) — the round's only device-to-host copy.

Stages (their keys name a shape; `keys` is the attention span rounded up to `BUCKET`):
  draft       ("draft", keys)          drafter pass over [b, MASK…] + new context, LM head on L rows
  tree_build  ("tree", alg, B, K)      log-softmax, top-K per depth, the tree on the device
  verify      ("verify", T, keys)      target pass over the T = 1 + B nodes, LM head, argmax
  commit      ("commit", T)            walk, KV compaction over all layers, state update
`ar` runs verify + commit as one stage ("ar", keys, steps), `steps` (≤ AR_STEPS) times over, each
step's result in its own row. A round — its stages, timing events between them and the copy of its
result rows to the host — is one CUDA graph, keyed by its stages' keys and its host slot: one graph
launch per round instead of one per stage (each launch left the GPU idle for a few µs).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.drafter import DFlashDrafter
from engine.fast import tree_ops
from engine.fast.forward import FusedDrafter, FusedTarget, kv_buffer, norm
from engine.kernels.tree_attention import pack_tree_mask
from engine.model import Qwen3ForCausalLM, RMSNorm
from engine.sampling import SamplingParams
from engine.stats import GenerationStats

if TYPE_CHECKING:
    from engine.decode import Decoder, Generation

BUCKET = 256  # attention spans are rounded up to this many rows: one graph per bucket
MAX_BUDGET = 512  # larger trees fall back to the reference path
# ar runs up to this many steps per graph replay (powers of two, fewer near max_tokens): between two
# replays the GPU idles for the graph launch, the result copy and the event records (~7 µs of a
# 0.13 ms step on the H200: 8 steps per replay made ar 9 % faster at context 64 and 13 % at 1024, 16
# another 0.5 %); tokens past an EOS are computed and dropped, as a queued round's are.
AR_STEPS = 16


def bucket(rows: int) -> int:
    return -(-rows // BUCKET) * BUCKET


class Graphs:
    """One CUDA graph per key: the first call runs eagerly (the warm-up), then it is captured."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bypass = False  # run every stage eagerly, captured or not (kernel profiles: engine/bench_profile.py)
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}
        self.pool = None

    def run(self, key: tuple, fn: Callable[[], None]) -> None:
        if self.bypass:
            fn()
            return
        graph = self.graphs.get(key)
        if graph is not None:
            graph.replay()
            return
        fn()
        if not self.enabled:
            return
        torch.cuda.synchronize()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):  # records only: the state is not touched
            fn()
        self.graphs[key] = graph


class Clock:
    """A round's stage boundaries: CUDA timing events recorded inside the round's graph, or host times
    on the CPU. A graph re-records its own events on every replay, so each graph key has its own set
    and a round's times are read right after its result, before its graph (same slot) runs again."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.sets: dict[tuple, list[torch.cuda.Event]] = {}

    def marks(self, key: tuple, n: int) -> list:
        """Where a round of graph `key` puts its n boundaries (a fresh list for host times)."""
        if not self.cuda:
            return []
        if key not in self.sets:  # external: recorded as event nodes of the graph, timed on every replay
            self.sets[key] = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
        return self.sets[key]

    def mark(self, marks: list, i: int) -> None:
        if self.cuda:
            marks[i].record()
        else:
            marks.append(time.perf_counter())

    def seconds(self, marks: list) -> list[float]:
        """The stages' durations, once the round is done."""
        if self.cuda:
            return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:], strict=False)]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]


class TreeBuffers:
    """Static per-width buffers: the round's tree and the verify outputs."""

    def __init__(self, t: int, feat_width: int, dtype: torch.dtype, device: torch.device) -> None:
        self.tokens = torch.zeros(t, dtype=torch.long, device=device)
        self.parents = torch.zeros(t, dtype=torch.long, device=device)
        self.depths = torch.zeros(t, dtype=torch.long, device=device)
        self.visible = torch.eye(t, dtype=torch.bool, device=device)
        self.packed = pack_tree_mask(self.visible)  # the tree-attention kernel's form of `visible`
        self.choices = torch.zeros(t, dtype=torch.long, device=device)
        self.feats = torch.zeros(t, feat_width, dtype=dtype, device=device)

    def tree(self) -> tree_ops.DeviceTree:
        return tree_ops.DeviceTree(self.tokens, self.parents, self.depths, self.visible)

    def store(self, tree: tree_ops.DeviceTree, lookup_chain: Tensor | None = None) -> None:
        """The tree into the first nodes; with `lookup_chain`, that branch grafted after them (tree_ops.graft)."""
        n = tree.tokens.shape[0]
        self.tokens[:n].copy_(tree.tokens)
        self.parents[:n].copy_(tree.parents)
        self.depths[:n].copy_(tree.depths)
        self.visible[:n, :n].copy_(tree.visible)
        self.visible[:n, n:].zero_()
        if lookup_chain is not None:
            tree_ops.graft(self.tree(), lookup_chain)
        self.packed.copy_(pack_tree_mask(self.visible))


class FastPath:
    def __init__(
        self,
        target: Qwen3ForCausalLM,
        drafter: DFlashDrafter | None,
        *,
        block_size: int,
        max_context: int,
        draft_window: int | None,
        capture: list[int],
        mask_id: int | None,
        graphs: bool,
        lookup: int = 0,
        lookup_tokens: int = 0,
    ) -> None:
        self.target, self.drafter = target, drafter
        self.fused_target = FusedTarget(target)
        self.fused_drafter = FusedDrafter(drafter, target.model.embed_tokens.weight) if drafter is not None else None
        self.device = target.lm_head.weight.device
        self.dtype = target.lm_head.weight.dtype
        self.block, self.depth_limit = block_size, block_size - 1
        self.lookup = lookup  # ddtree's context-lookup branch: its n-gram order, 0 for none
        self.lookup_tokens = lookup_tokens if lookup else 0  # and its length
        # The most tokens a round commits (the walk's longest path, bonus included): a block, or more
        # along a lookup branch longer than the drafted depth, rounded up to a power of two (the
        # commit kernel's tl.arange). Result rows, the drafter's new-context rows and the commit's
        # moves are this wide.
        self.span = 1 << (max(block_size, 1 + self.lookup_tokens) - 1).bit_length()
        self.draft_window = draft_window
        self.capture = capture
        cfg = target.config
        # Room for a round in flight past the end, a lookup branch included.
        self.rows = bucket(max_context + MAX_BUDGET + 1 + 2 * block_size + 2 * self.span)
        dev = self.device
        self.kv = kv_buffer(cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim, self.rows, self.dtype, dev)
        self.dkv = None
        if drafter is not None:
            d = drafter.config
            self.dkv = kv_buffer(d.num_hidden_layers, d.num_key_value_heads, d.head_dim, self.rows, self.dtype, dev)
        self.feat_width = len(capture) * cfg.hidden_size
        self.index = torch.arange(self.rows, device=dev)
        # The text so far, for the context lookup: hist[start] is the bonus (prefill and commits write it).
        self.hist = torch.zeros(self.rows, dtype=torch.long, device=dev)
        self.start = torch.zeros(1, dtype=torch.long, device=dev)
        self.bonus = torch.zeros(1, dtype=torch.long, device=dev)
        self.n_new = torch.zeros(1, dtype=torch.long, device=dev)
        self.feats = torch.zeros(self.span, self.feat_width, dtype=self.dtype, device=dev)
        self.ban = torch.zeros(cfg.vocab_size, dtype=torch.float32, device=dev)
        self.block_ids = torch.full((block_size,), mask_id if mask_id is not None else 0, device=dev)
        # The next draft pass's inputs, written by prefill and by each commit: the block's positions
        # start + j (block of them), the new context's positions start − n_new + j (span), and the
        # block's end row.
        span = self.span
        self.draft_in = torch.zeros(block_size + span + 1, dtype=torch.long, device=dev)
        self.block_pos, self.ctx_pos = self.draft_in[:block_size], self.draft_in[block_size : block_size + span]
        self.draft_end = self.draft_in[block_size + span]
        self.draft_logits = torch.zeros(self.depth_limit, cfg.vocab_size, dtype=torch.float32, device=dev)
        # A round's result row (a multi-step ar round's: one per step).
        self.result = torch.zeros(AR_STEPS, span + 3, dtype=torch.long, device=dev)
        # Two (pinned) host slots for the result rows of the round being read and the round in flight.
        self.host = torch.zeros(2, AR_STEPS, span + 3, dtype=torch.long, pin_memory=dev.type == "cuda")
        self.copied = [torch.cuda.Event() for _ in range(2)] if dev.type == "cuda" else []
        self.lookahead = 1 if dev.type == "cuda" else 0  # rounds queued beyond the one being read
        self.buffers: dict[int, TreeBuffers] = {}
        self.plans: dict[tuple[int, int], tree_ops.TreePlan] = {}
        # The tree build as Triton kernels (tree_triton) on CUDA; ENGINE_TRITON_TREE=0 keeps
        # the PyTorch ops (tree_ops), which are also what runs on the CPU.
        self.triton_trees: dict[tuple[int, int], object] = {}
        self.use_triton_tree = (
            dev.type == "cuda"
            and os.environ.get("ENGINE_TRITON_TREE", "1") != "0"
            and importlib.util.find_spec("triton") is not None
        )
        triton_ok = dev.type == "cuda" and importlib.util.find_spec("triton") is not None
        # Layers in Triton kernels (fast/linear_triton.py): ENGINE_TRITON_QKV=0 keeps RMSNorm + q/k/v +
        # q/k norm + RoPE + cache write in PyTorch ops, ENGINE_TRITON_MLP=0 o_proj and the MLP.
        for fused in (self.fused_target, self.fused_drafter):
            if fused is not None:
                fused.triton = triton_ok and os.environ.get("ENGINE_TRITON_QKV", "1") != "0"
                fused.triton_mlp = triton_ok and os.environ.get("ENGINE_TRITON_MLP", "1") != "0"
        # The LM head's fp32 weight for the PyTorch ops (it is the weight itself when that is fp32).
        self.head = None if self.fused_target.triton_mlp else target.lm_head.weight.float()
        # The commit stage as one Triton kernel (ENGINE_TRITON_COMMIT=0: the PyTorch ops below); its
        # tl.arange needs power-of-two block and K/V row widths.
        width = self.kv.shape[3] * self.kv.shape[4]
        pow2 = (block_size & (block_size - 1)) == 0 and (width & (width - 1)) == 0
        self.triton_commit = triton_ok and pow2 and os.environ.get("ENGINE_TRITON_COMMIT", "1") != "0"
        # Verify attention: the tree-attention kernel (engine/kernels; it reads the packed ancestor
        # mask and was 3-9x faster than SDPA per call on the H200), or ENGINE_TREE_ATTENTION=sdpa for
        # SDPA with a dense [T, keys] mask (also what runs on the CPU).
        self.tree_attention = triton_ok and os.environ.get("ENGINE_TREE_ATTENTION", "triton") == "triton"
        # The draft pass through the same kernel (its block as past rows), unless a window must hide rows.
        self.draft_kernel = self.tree_attention and draft_window is None
        self.graphs = Graphs(graphs and dev.type == "cuda")
        self.clock = Clock(dev.type == "cuda")

    def _scores(self, h: Tensor, final: RMSNorm, out: Tensor | None = None) -> Tensor:
        """fp32 logits of RMSNorm(h), banned ids at −inf (into `out` if given).

        The logits are fp32: bf16 logits of a 4k vocabulary tie exactly (gap 0) often enough to
        flip greedy choices between a one-token and a tree pass; fp32 makes the argmax well defined.
        With the Triton layer kernels, norm, head and mask are one `linear` launch on the bf16 weights:
        bf16 × bf16 products are exact in its fp32 accumulator, so the sums are fp32 sums of the same
        products, in the kernel's own order; the normed input is rounded as in the layer kernels
        (linear_triton's docstring). One kernel instead of four (an IEEE fp32 matmul in Triton was
        slower than the four).
        """
        if self.fused_target.triton_mlp:
            from engine.fast.linear_triton import linear

            if out is None:
                out = torch.empty(h.shape[0], self.ban.shape[0], dtype=torch.float32, device=h.device)
            # 64 columns per program (64 programs for a 4k vocabulary): ar 0.7 % faster than 32 on the H200.
            head = self.target.lm_head.weight
            return linear(h, head, norm=final.weight, eps=final.eps, bias=self.ban, out=out, block_n=64)
        assert self.head is not None
        scores = F.linear(norm(h, final).float(), self.head, self.ban)
        return scores if out is None else out.copy_(scores)

    def supports(self, algorithm: str, budget: int, params: SamplingParams) -> bool:
        return params.temperature == 0 and (algorithm != "ddtree" or budget <= MAX_BUDGET)

    def width(self, algorithm: str, budget: int) -> int:
        return {"ar": 1, "dflash": self.block, "ddtree": 1 + budget + self.lookup_tokens}[algorithm]

    def _buffers(self, t: int) -> TreeBuffers:
        if t not in self.buffers:
            self.buffers[t] = TreeBuffers(t, self.feat_width, self.dtype, self.device)
        return self.buffers[t]

    # -- stages (device work only: no host reads, no host-to-device copies) ----------------

    def _draft(self, keys: int) -> None:
        assert self.fused_drafter is not None and self.dkv is not None
        s, block = self.start, self.block
        ids, block_pos, ctx_pos = self.block_ids, self.block_pos, self.ctx_pos  # written by the last commit
        if self.draft_kernel:  # every row before the block's end is visible: no mask to build
            tree = (self.draft_end, None)
            h = self.fused_drafter.forward(ids, block_pos, self.feats, ctx_pos, self.dkv, keys, None, tree)
        else:
            cols = self.index[:keys]
            context = cols < s
            if self.draft_window is not None:
                context &= cols >= s - self.draft_window
            visible = context | ((cols >= s) & (cols < s + block))
            h = self.fused_drafter.forward(
                ids, block_pos, self.feats, ctx_pos, self.dkv, keys, visible[None].expand(block, keys)
            )
        assert self.drafter is not None
        self._scores(h[1:], self.drafter.norm, out=self.draft_logits)

    def _tree(self, algorithm: str, budget: int, k: int) -> None:
        if algorithm == "dflash":
            self._buffers(self.block).store(tree_ops.chain_tree(self.bonus, self.draft_logits.argmax(-1)))
            return
        if self.use_triton_tree:  # writes straight into the static tree buffers
            triton_tree = self.triton_trees[(budget, k)]
            triton_tree.build(self.bonus, self.draft_logits)  # type: ignore[attr-defined]
            if self.lookup:  # (the Triton build and graft also write the packed mask)
                triton_tree.graft(self.hist, self.start, self.lookup)  # type: ignore[attr-defined]
            return
        top = torch.log_softmax(self.draft_logits, -1).topk(k, dim=-1)
        tree = tree_ops.build_tree(self.plans[(budget, k)], self.bonus, top.indices, top.values)
        chain = None
        if self.lookup:
            chain = tree_ops.context_chain(self.hist, self.start, self.lookup, self.lookup_tokens)
        self._buffers(self.width(algorithm, budget)).store(tree, chain)

    def _verify(self, t: int, keys: int) -> Tensor:
        buf, s = self._buffers(t), self.start
        if t == 1:  # ar: the bonus token at position and row `start`, and no drafter to feed
            tokens, positions, rows, capture = self.bonus, s, s, ()
        else:
            tokens, positions, rows, capture = buf.tokens, s + buf.depths, s + self.index[:t], self.capture
        if self.tree_attention:
            # ar too sees its own row as a one-node tree rather than as one more past row, which would
            # skip the kernel's tree loop (~7 µs of a 0.13 ms step in the kernel profile) but cut the
            # keys into other blocks than a tree pass's root does: in the H200 benchmark, 32 instead
            # of 19 of 144 outputs then diverged from ar at near-ties.
            hidden, feats = self.fused_target.forward(
                tokens, positions, self.kv, rows, keys, None, capture, tree=(s[0], buf.packed)
            )
        else:
            cols = self.index[:keys]
            rel = cols - s
            in_tree = (rel >= 0) & (rel < t)
            mask = (cols < s)[None, :] | (in_tree[None, :] & buf.visible[:, rel.clamp(0, t - 1)])
            hidden, feats = self.fused_target.forward(tokens, positions, self.kv, rows, keys, mask, capture)
        scores = self._scores(hidden, self.target.model.norm)
        if t > 1:
            buf.feats.copy_(feats)
            # (ar's commit, in the same graph, takes its own argmax)
            if self.triton_commit:
                from engine.fast.commit_triton import choices

                choices(scores, buf.choices)
            else:
                torch.argmax(scores, -1, out=buf.choices)
        return scores

    def _commit(self, t: int, scores: Tensor | None = None, step: int = 0) -> None:
        """scores: ar's verify logits (ar's commit takes the argmax; every other commit reads the
        choices the verify stage wrote); step: ar's step within its round (its result row)."""
        buf, span, result = self._buffers(t), self.span, self.result[step]
        if t == 1 and self.triton_commit:  # ar: the argmax and the five updates in one kernel
            from engine.fast.commit_triton import commit_one

            assert scores is not None
            commit_one(scores, buf.choices, result, self.start, self.bonus, span)
            return
        if t == 1:  # ar: the one node is accepted; its choice is the next bonus
            assert scores is not None
            torch.argmax(scores, -1, out=buf.choices)
            result[0].fill_(1)
            result[1:2].copy_(self.bonus)
            result[span + 1 : span + 2].copy_(buf.choices)
            self.bonus.copy_(buf.choices)
            self.start.add_(1)
            return
        if self.triton_commit:  # the same steps in one kernel (fast/commit_triton.py)
            from engine.fast.commit_triton import commit

            commit(
                buf.tokens, buf.parents, buf.depths, buf.choices, buf.feats, self.kv, self.feats, result, self.start,
                self.bonus, self.n_new, self.block_ids, self.draft_in, self.hist, self.block,
            )  # fmt: skip
            return
        w = tree_ops.walk(buf.tree(), buf.choices, span)
        # The accepted tokens, then the new bonus, into the text (rows past the count get scratch the
        # bonus or a later commit overwrites).
        self.hist.index_copy_(0, self.start + self.index[:span], buf.tokens[w.path])
        self.hist.index_copy_(0, self.start + w.count, w.bonus)
        tree_ops.compact(self.kv, self.start, w.path)
        self.feats.copy_(buf.feats[w.path])
        self.n_new.copy_(w.count)
        result[:1].copy_(w.count)
        result[1 : span + 1].copy_(buf.tokens[w.path])
        result[span + 1 : span + 2].copy_(w.bonus)
        result[span + 2 : span + 3].copy_((buf.tokens[1:] >= 0).sum().view(1))
        self.bonus.copy_(w.bonus)
        self.start.add_(w.count)
        self._next_draft_inputs()

    def _next_draft_inputs(self) -> None:
        """block_ids[0] and draft_in from bonus, start and n_new (the Triton commit writes them itself)."""
        self.block_pos.copy_(self.start + self.index[: self.block])
        self.ctx_pos.copy_(self.start - self.n_new + self.index[: self.span])
        self.draft_end.copy_(self.start[0] + self.block)
        self.block_ids[:1].copy_(self.bonus)

    # -- prefill and the loop --------------------------------------------------------------

    def prefill(self, prompt_ids: list[int], banned: list[int], draft: bool) -> int:
        """Fill both caches with the prompt; return the first bonus token (one host read)."""
        n = len(prompt_ids)
        self.ban.zero_()
        if banned:
            self.ban[torch.tensor(banned, device=self.device)] = float("-inf")
        ids = torch.tensor(prompt_ids, device=self.device)
        keys = bucket(n)
        pos = self.index[:n]
        mask = self.index[:keys][None, :] <= pos[:, None]
        hidden, feats = self.fused_target.forward(ids, pos, self.kv, pos, keys, mask, self.capture)
        self.bonus.copy_(self._scores(hidden[-1:], self.target.model.norm).argmax(-1))
        self.hist[:n].copy_(ids)
        self.hist[n : n + 1].copy_(self.bonus)
        if draft:
            assert self.fused_drafter is not None and self.dkv is not None
            self.fused_drafter.context(feats, pos, self.dkv, pos)
        self.start.fill_(n)
        self.n_new.zero_()
        if draft:
            self._next_draft_inputs()
        return int(self.bonus.item())

    def _round_stages(
        self, algorithm: str, budget: int, k: int, start: int, steps: int
    ) -> list[tuple[tuple, Callable[[], None]]]:
        t = self.width(algorithm, budget)
        if algorithm == "ar":
            ar_keys = bucket(start + steps)

            def run() -> None:  # the bonus is the one node: no tree to build
                for i in range(steps):
                    self._commit(1, self._verify(1, ar_keys), step=i)

            return [(("ar", ar_keys, steps), run)]
        verify_keys = bucket(start + t)
        # The kernel also reads (masked) the block-wide rows after the block: keep them inside the bucket.
        draft_keys = bucket(start + self.block * (2 if self.draft_kernel else 1))
        return [
            (("draft", draft_keys), lambda: self._draft(draft_keys)),
            (("tree", algorithm, budget, k), lambda: self._tree(algorithm, budget, k)),
            (("verify", t, verify_keys), lambda: self._verify(t, verify_keys)),
            (("commit", t), lambda: self._commit(t)),
        ]

    def _queue_round(self, algorithm: str, budget: int, k: int, start: int, slot: int, steps: int) -> list:
        """Launch one round (start: the committed length, or an upper bound of it; steps: ar's steps in
        the round) as one graph that ends by copying its result rows to host slot `slot`; return its stage
        marks (read them with `Clock.seconds` once the slot is read, before the next round of that slot)."""
        stages = self._round_stages(algorithm, budget, k, start, steps)
        key = (*(key for key, _ in stages), slot)
        marks = self.clock.marks(key, len(stages) + 1)

        def run() -> None:
            for i, (_, fn) in enumerate(stages):
                self.clock.mark(marks, i)
                fn()
            self.clock.mark(marks, len(stages))
            self.host[slot, :steps].copy_(self.result[:steps], non_blocking=True)

        self.graphs.run(key, run)
        if self.copied:
            self.copied[slot].record()
        return marks

    def _read(self, slot: int, steps: int) -> list[list[int]]:
        """The result rows of the round that wrote `slot`, one per step: [count, tokens…, bonus, live nodes]."""
        if self.copied:
            self.copied[slot].synchronize()
        return self.host[slot, :steps].tolist()

    @torch.inference_mode()
    def generate(
        self,
        dec: Decoder,
        prompt_ids: list[int],
        params: SamplingParams,
        algorithm: str,
        budget: int,
        on_progress: Callable[[list[int]], bool | None] | None,
    ) -> Generation:
        n = len(prompt_ids)
        banned = dec.banned_ids(params)
        vocab = self.target.config.vocab_size
        k = min(budget, vocab - len(banned))
        if algorithm == "ddtree" and (budget, k) not in self.plans:
            self.plans[(budget, k)] = tree_ops.TreePlan(budget, k, self.depth_limit, self.device)
            if self.use_triton_tree:
                from engine.fast.tree_triton import TritonTree  # needs triton, present with CUDA builds

                plan, buf = self.plans[(budget, k)], self._buffers(self.width(algorithm, budget))
                self.triton_trees[(budget, k)] = TritonTree(plan, vocab, self.device, buf.tree(), buf.packed)
        speculative = algorithm != "ar"
        stats = GenerationStats(
            algorithm,
            dec.drafted_per_round(algorithm, budget),
            self.block if speculative else 1,
            accepted_per_depth=[0] * dec.deepest(algorithm),
        )
        t0 = dec._sync()
        bonus = self.prefill(prompt_ids, banned, draft=speculative)
        t1 = time.perf_counter()
        stats.prefill_seconds = t1 - t0

        out = [bonus]
        rounds: list[tuple[int, int, list[float], int]] = []  # (tree size, accepted count, stage seconds, steps)
        # On CUDA the next round is queued before this one's result is read (its key bucket from an upper
        # bound on the context: a round commits at most `span` tokens, an ar round its steps), so the
        # GPU never waits for the host's reading of a result, the stop checks or the progress callback.
        # Queued only while surely needed: max_tokens is not reached even if every queued round commits
        # its most (only an EOS or a stop string can end the generation before it). A round queued past
        # the end is a whole round of GPU work wasted per generation, which the next request waits for
        # (ddtree B = 64 on the H200 decoded 200 tokens 2 % faster without it). ar rounds take as many
        # steps as surely fit, up to AR_STEPS.
        limit = min(params.max_tokens, dec.max_context - n)
        ahead = self.lookahead
        most_steps = AR_STEPS if algorithm == "ar" else 1
        queued: list[tuple[int, int, list]] = []  # (host slot, steps, stage marks), oldest first
        rounds_queued = 0
        finish = dec._finish(out, params, n)
        while True:
            finish = dec._report(on_progress, out, finish)
            if finish is not None:
                break
            while len(queued) <= ahead:
                most = sum(q[1] if algorithm == "ar" else self.span for q in queued)  # tokens queued rounds may commit
                room = limit - len(out) - most
                if queued and room <= 0:
                    break
                steps = 1 << (min(most_steps, max(room, 1)).bit_length() - 1)  # a power of two: few graphs
                bound = n + len(out) - 1 + most
                slot = rounds_queued % 2
                queued.append((slot, steps, self._queue_round(algorithm, budget, k, bound, slot, steps)))
                rounds_queued += 1
            slot, steps, marks = queued.pop(0)
            results = self._read(slot, steps)
            seconds = self.clock.seconds(marks)
            for res in results:  # an ar round's steps past the end are dropped
                count, bonus = res[0], res[self.span + 1]
                out += res[2 : 1 + count] + [bonus]
                rounds.append((res[self.span + 2] if speculative else 0, count, seconds, steps))
                finish = dec._finish(out, params, n)
                if finish is not None:
                    break
        stats.decode_seconds = dec._sync() - t1
        names = ("verify",) if algorithm == "ar" else ("draft", "tree_build", "verify", "commit")
        for size, count, seconds, steps in rounds:  # an ar round's steps share its time
            spans = dict(zip(names, (s / steps for s in seconds), strict=True))
            stage = tuple(spans.get(s, 0.0) for s in ("draft", "tree_build", "verify", "commit"))
            stats.record_round(size, list(range(1, count)), stage)
        return dec._generation(finish, params, n, stats)
