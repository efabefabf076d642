"""One decoding loop for `ar`, `dflash` and `ddtree` (DESIGN §7.2).

A round, starting from the bonus token b the target already chose:
  1. draft       the DFlash drafter sees [b, MASK…] plus the target features of newly committed
                 tokens and returns one distribution per depth (skipped for `ar`);
  2. tree_build  best-first tree under the budget (`ddtree`), the argmax chain (`dflash`), or
                 just the root (`ar`); compiled to ids, depth positions and the ancestor mask;
  3. verify      one target forward over the 1 + B nodes, then one target choice per node
                 (argmax, or one draw each when sampling) and the walk from the root;
  4. commit      the accepted rows of the target cache move into place; their features become
                 the drafter's next context.
At T = 0 every committed token is the target's argmax given its exact prefix, so all three
algorithms emit the same tokens (bit-exact in fp32); at T > 0 each node's token is one draw from
the target distribution, so the output distribution is the target's (lossless).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.drafter import DFlashDrafter
from engine.fast.path import FastPath
from engine.kv_cache import KVCache
from engine.model import Qwen3ForCausalLM
from engine.sampling import Sampler, SamplingParams
from engine.stats import GenerationStats
from engine.tokenizer import Tokenizer
from engine.tree import Tree, build_tree, chain_tree, context_chain, graft, visibility, walk

ALGORITHMS = ("ar", "dflash", "ddtree")
MAX_LOOKUP = 8  # longest n-gram the context lookup matches
# The lookup branch's length: up to MAX_LOOKUP_TOKENS; by default 31, twice the drafted depth of a
# 16-token block (H200, context 1024, B = 16: 15 → 2.91× ar, 31 → 3.26×, 63 → 3.19×; engine/BENCHMARKS.md).
MAX_LOOKUP_TOKENS = 63
DEFAULT_LOOKUP_TOKENS = 31


class RequestError(ValueError):
    """A request the engine cannot serve as given; the message names the limit."""


@dataclass
class Generation:
    tokens: list[int]
    text: str
    finish_reason: str  # "stop" (EOS or a stop string), "length" (max_tokens or context) or "cancelled"
    prompt_tokens: int
    stats: GenerationStats


class Decoder:
    """Owns the caches of one sequence at a time; requests must not run concurrently on it."""

    def __init__(
        self,
        target: Qwen3ForCausalLM,
        drafter: DFlashDrafter | None,
        tokenizer: Tokenizer,
        *,
        algorithm: str = "ddtree",
        budget: int = 32,
        block_size: int | None = None,
        draft_window: int | None = None,
        max_context: int | None = None,
        fast: bool | None = None,
        lookup: int = 0,
        lookup_tokens: int | None = None,
    ) -> None:
        """lookup: n-gram order of ddtree's context-lookup branch (engine/tree.py), 0 for none;
        lookup_tokens: the branch's length (default DEFAULT_LOOKUP_TOKENS)."""
        self.target, self.drafter, self.tokenizer = target, drafter, tokenizer
        self.device = target.lm_head.weight.device
        self.dtype = target.lm_head.weight.dtype
        trained_block = drafter.config.block_size if drafter is not None else 1
        self.block_size = block_size or trained_block
        if drafter is not None and not 2 <= self.block_size <= trained_block:
            raise RequestError(f"block_size must be in 2..{trained_block} (the drafter's), got {self.block_size}")
        if draft_window is not None and draft_window < 1:
            raise RequestError(f"draft_window must be >= 1 or unset, got {draft_window}")
        self.draft_window = draft_window
        if not 0 <= lookup <= MAX_LOOKUP:
            raise RequestError(f"lookup must be an n-gram order in 0..{MAX_LOOKUP} (0: no lookup), got {lookup}")
        self.lookup = lookup
        self.lookup_tokens = lookup_tokens if lookup_tokens is not None else DEFAULT_LOOKUP_TOKENS
        if not 1 <= self.lookup_tokens <= MAX_LOOKUP_TOKENS:
            raise RequestError(f"lookup_tokens must be in 1..{MAX_LOOKUP_TOKENS}, got {self.lookup_tokens}")
        # The most tokens a round commits: the bonus and a path down the drafted tree or the branch.
        self.span = max(self.block_size, 1 + self.lookup_tokens) if lookup else self.block_size
        self.max_context = max_context or target.config.max_position_embeddings
        if self.max_context < 2:
            raise RequestError(f"max_context must be at least 2 (got {self.max_context})")
        # Tree nodes sit up to span − 1 positions past the committed context, and the fast path may
        # run one round past the end (engine/fast/path.py: a round in flight) and draft a block after it.
        reach = self.max_context + 2 * self.span + self.block_size
        target.model.rotary.ensure(reach)
        if drafter is not None:
            drafter.rotary.ensure(reach)
        self.capture = drafter.config.target_layer_ids if drafter is not None else []
        self.mask_id = drafter.config.mask_token_id if drafter is not None else None
        self.algorithm, self.budget = self.check(algorithm, budget)
        self.cache: KVCache | None = None
        self.draft_cache: KVCache | None = None
        # The fast path (engine/fast): on by default on CUDA, off with ENGINE_FAST=0; ENGINE_FAST=1
        # (or fast=True) also runs it on the CPU, eagerly, which is how tests compare it with this path.
        if fast is None:
            env = os.environ.get("ENGINE_FAST", "")
            fast = env == "1" or (env != "0" and self.device.type == "cuda")
        self.fast = (
            FastPath(
                target,
                drafter,
                block_size=self.block_size,
                max_context=self.max_context,
                draft_window=draft_window,
                capture=list(self.capture),
                mask_id=self.mask_id,
                graphs=os.environ.get("ENGINE_CUDA_GRAPHS", "1") != "0",
                lookup=lookup,
                lookup_tokens=self.lookup_tokens,
            )
            if fast
            else None
        )

    # -- configuration -------------------------------------------------------------------

    def check(self, algorithm: str, budget: int) -> tuple[str, int]:
        if algorithm not in ALGORITHMS:
            raise RequestError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        if algorithm != "ar" and self.drafter is None:
            raise RequestError(f"algorithm {algorithm!r} needs a drafter model")
        if algorithm == "ddtree" and budget < 1:
            raise RequestError(f"budget must be at least 1 node (got {budget})")
        return algorithm, budget

    def check_prompt(self, prompt_ids: list[int]) -> None:
        if not prompt_ids:
            raise RequestError("the prompt is empty")
        n = len(prompt_ids)
        if n >= self.max_context:
            raise RequestError(
                f"the prompt has {n} tokens; the limit is {self.max_context - 1} (max context {self.max_context})"
            )
        vocab = self.target.config.vocab_size
        if min(prompt_ids) < 0 or max(prompt_ids) >= vocab:
            raise RequestError(f"prompt token ids must be in 0..{vocab - 1}")

    def drafted_per_round(self, algorithm: str, budget: int) -> int:
        """The drafter's nodes per round (the stats' `budget`): 0, block_size − 1, or ddtree's B."""
        return {"ar": 0, "dflash": self.block_size - 1, "ddtree": budget}[algorithm]

    def nodes_per_round(self, algorithm: str, budget: int) -> int:
        """Tree nodes a round may verify besides the root: the drafted ones, plus room for a lookup branch."""
        lookup = self.lookup_tokens if self.lookup and algorithm == "ddtree" else 0
        return self.drafted_per_round(algorithm, budget) + lookup

    def deepest(self, algorithm: str) -> int:
        """The deepest node a round can accept: 0 (ar), block_size − 1, or ddtree's lookup branch's end."""
        if algorithm == "ar":
            return 0
        return self.span - 1 if algorithm == "ddtree" else self.block_size - 1

    def _caches(self, nodes: int) -> tuple[KVCache, KVCache | None]:
        rows = self.max_context + nodes + 1
        cfg = self.target.config
        if self.cache is None or self.cache.rows < rows:
            self.cache = KVCache(
                cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim, rows, dtype=self.dtype, device=self.device
            )
        if self.drafter is not None and self.draft_cache is None:
            d = self.drafter.config
            self.draft_cache = KVCache(
                d.num_hidden_layers,
                d.num_key_value_heads,
                d.head_dim,
                self.max_context,
                dtype=self.dtype,
                device=self.device,
            )
            self.draft_cache.window = self.draft_window
        return self.cache, self.draft_cache

    def banned_ids(self, params: SamplingParams) -> list[int]:
        """Never drafted, never emitted: special tokens (EOS only when ignore_eos) and MASK."""
        eos = self.tokenizer.eos_id
        banned = {i for i in self.tokenizer.special_ids if i != eos}
        if self.mask_id is not None:
            banned.add(self.mask_id)
        if params.ignore_eos and eos is not None:
            banned.add(eos)
        return sorted(banned)

    def _sync(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    # -- generation ----------------------------------------------------------------------

    def generate_text(self, prompt: str, params: SamplingParams, **kw: object) -> Generation:
        if not prompt:
            raise RequestError("the prompt is empty")
        return self.generate(self.tokenizer.encode(prompt), params, **kw)  # type: ignore[arg-type]

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        *,
        algorithm: str | None = None,
        budget: int | None = None,
        on_progress: Callable[[list[int]], bool | None] | None = None,
    ) -> Generation:
        """Generate from token ids. `on_progress(tokens)` is called after prefill and after every
        round with all tokens emitted so far (the final list on the last call); returning False
        cancels the generation (finish_reason "cancelled"), e.g. when a client disconnects."""
        algorithm, budget = self.check(algorithm or self.algorithm, budget if budget is not None else self.budget)
        try:
            params.validate()
        except ValueError as e:
            raise RequestError(str(e)) from None
        self.check_prompt(prompt_ids)
        if self.fast is not None and self.fast.supports(algorithm, budget, params):
            return self.fast.generate(self, prompt_ids, params, algorithm, budget, on_progress)
        n = len(prompt_ids)
        nodes = self.nodes_per_round(algorithm, budget)
        cache, draft_cache = self._caches(nodes)
        sampler = Sampler(params, self.banned_ids(params), self.device)
        stats = GenerationStats(
            algorithm,
            self.drafted_per_round(algorithm, budget),
            self.block_size if algorithm != "ar" else 1,
            accepted_per_depth=[0] * self.deepest(algorithm),
        )

        # Prefill: the prompt's K/V and features; its last logits choose the first bonus token.
        t0 = self._sync()
        ids = torch.tensor([prompt_ids], device=self.device)
        hidden, feats = self.target(ids, torch.arange(n, device=self.device)[None], cache=cache, capture=self.capture)
        bonus = int(sampler.choose(self.target.logits(hidden[:, -1]))[0])
        t1 = self._sync()
        stats.prefill_seconds = t1 - t0

        out = [bonus]
        start = n  # committed rows; the bonus token is chosen but not yet in the cache
        finish = self._finish(out, params, n)
        while True:
            finish = self._report(on_progress, out, finish)
            if finish is not None:
                break
            t0 = self._sync()
            tree, draft_seconds = self._draft_tree(algorithm, budget, bonus, start, feats, sampler)
            if algorithm == "ddtree" and self.lookup:
                tree = graft(tree, context_chain(prompt_ids + out, self.lookup, self.lookup_tokens))
            t_tree = self._sync()
            accepted, bonus, feats = self._verify(tree, start, cache, sampler)
            t_verify = self._sync()
            cache.commit(start, accepted)
            start += len(accepted)
            t_commit = self._sync()
            stats.record_round(
                tree.size,
                [tree.depths[i] for i in accepted[1:]],
                (draft_seconds, t_tree - t0 - draft_seconds, t_verify - t_tree, t_commit - t_verify),
            )
            out += [tree.tokens[i] for i in accepted[1:]] + [bonus]
            finish = self._finish(out, params, n)
        stats.decode_seconds = self._sync() - t1
        return self._generation(finish, params, n, stats)

    def _generation(
        self, finish: tuple[list[int], str], params: SamplingParams, prompt_len: int, stats: GenerationStats
    ) -> Generation:
        """The result: the tokens, their text cut before the first stop string, and why it ended."""
        tokens, reason = finish
        text = self.tokenizer.decode(tokens)
        for s in params.stop:
            if s in text:
                text = text[: text.index(s)]
        return Generation(tokens, text, reason, prompt_len, stats)

    def _draft_tree(
        self, algorithm: str, budget: int, bonus: int, start: int, feats: list[Tensor], sampler: Sampler
    ) -> tuple[Tree, float]:
        """The round's tree and the seconds spent in the drafter's forward pass."""
        if algorithm == "ar":
            return Tree([bonus], [-1], [0]), 0.0
        assert self.drafter is not None and self.draft_cache is not None and self.mask_id is not None
        t0 = self._sync()
        # Context = features of the tokens committed since the last draft, at their own positions.
        c = feats[0].shape[1]
        ctx = self.drafter.project(feats)
        ctx_pos = torch.arange(start - c, start, device=self.device)[None]
        block = torch.tensor([[bonus] + [self.mask_id] * (self.block_size - 1)], device=self.device)
        block_pos = torch.arange(start, start + self.block_size, device=self.device)[None]
        h = self.drafter(
            self.target.model.embed_tokens(block), block_pos, ctx, ctx_pos, cache=self.draft_cache, cache_len=start - c
        )
        logits = self.target.logits(h[0, 1:]).float()  # [L, V]: depths 1..L
        if sampler.banned.numel():
            logits = logits.index_fill(-1, sampler.banned, float("-inf"))
        draft_seconds = self._sync() - t0
        if algorithm == "dflash":
            tree = chain_tree(bonus, logits.argmax(-1).tolist())
        else:
            k = min(budget, logits.shape[-1] - int(sampler.banned.numel()))
            top = torch.log_softmax(logits, -1).topk(k, dim=-1)  # [L, K], sorted
            tree = build_tree(bonus, top.indices.cpu().numpy(), top.values.cpu().numpy(), budget)
        return tree, draft_seconds

    def _verify(self, tree: Tree, start: int, cache: KVCache, sampler: Sampler) -> tuple[list[int], int, list[Tensor]]:
        """Target forward over the tree; returns (accepted nodes, next bonus, features of accepted)."""
        ids = torch.tensor([tree.tokens], device=self.device)
        positions = start + torch.tensor([tree.depths], device=self.device)
        mask = None
        if tree.size:
            # Every node sees the whole committed past, then only its ancestors and itself.
            mask = torch.ones(1 + tree.size, start + 1 + tree.size, dtype=torch.bool, device=self.device)
            mask[:, start:] = torch.from_numpy(visibility(tree.parents)).to(self.device)
        hidden, feats = self.target(ids, positions, cache=cache, start=start, mask=mask, capture=self.capture)
        choices = sampler.choose(self.target.logits(hidden[0])).tolist()
        accepted, bonus = walk(tree, choices)
        index = torch.tensor(accepted, device=self.device)
        return accepted, bonus, [f[:, index] for f in feats]

    @staticmethod
    def _report(on_progress: Callable[[list[int]], bool | None] | None, out: list[int],
                finish: tuple[list[int], str] | None) -> tuple[list[int], str] | None:
        """Hand the caller the tokens so far; an answer of False cancels (a streaming client went away)."""
        if on_progress is not None and on_progress(finish[0] if finish else out) is False and finish is None:
            return out, "cancelled"
        return finish

    def _finish(self, out: list[int], params: SamplingParams, prompt_len: int) -> tuple[list[int], str] | None:
        """(tokens, finish_reason) once the output must end, else None."""
        cuts: list[tuple[int, str]] = []
        eos = self.tokenizer.eos_id
        if not params.ignore_eos and eos in out:
            cuts.append((out.index(eos), "stop"))
        if params.stop:
            cut = self._stop_string_cut(out, params.stop)
            if cut is not None:
                cuts.append((cut, "stop"))
        cuts.append((params.max_tokens, "length"))
        cuts.append((self.max_context - prompt_len, "length"))
        cut, reason = min(cuts, key=lambda c: c[0])
        return None if cut > len(out) else (out[:cut], reason)

    def _stop_string_cut(self, out: list[int], stops: list[str]) -> int | None:
        """Fewest tokens whose text contains a stop string (they are kept; the text is cut)."""
        if not any(s in self.tokenizer.decode(out) for s in stops):
            return None
        lo, hi = 1, len(out)
        while lo < hi:  # text containment is monotone in the prefix length
            mid = (lo + hi) // 2
            if any(s in self.tokenizer.decode(out[:mid]) for s in stops):
                hi = mid
            else:
                lo = mid + 1
        return lo
