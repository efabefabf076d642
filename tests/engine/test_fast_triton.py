"""The fast path's Triton kernels against the PyTorch ops they replace: the tree build
(engine.fast.tree_triton vs engine.fast.tree_ops), the layers' fused projections, norms, RoPE, cache
writes and MLP, and the drafter's attention through the tree kernel (engine.fast.linear_triton vs
FusedLayer's PyTorch ops) and the commit stage (engine.fast.commit_triton
vs tree_ops.walk + tree_ops.compact). On the CPU through Triton's interpreter
(a subprocess, as TRITON_INTERPRET must be set before triton is imported), on the GPU compiled
(skipped without CUDA)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")

CHECK = """
import sys, torch
from engine.fast import tree_ops
from engine.fast.tree_triton import TritonTree
from engine.kernels.tree_attention import pack_tree_mask
device = sys.argv[1]
# (2, 600, 8): the vocabulary top-K's last chunk (ids 768-1023) lies wholly past the vocabulary
cases = [(1, 50, 1), (3, 300, 5), (6, 200, 16), (2, 40, 64), (4, 120, 30), (2, 600, 8)] if device == "cpu" else \\
    [(15, 4096, b) for b in (16, 32, 64, 128, 256)] + [(7, 1000, 100)]
added = reused = 0
for seed, (depth, vocab, budget) in enumerate(cases):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(depth, vocab, generator=g) * 3).to(device)
    logits[:, 3] = float("-inf")  # a banned id
    k = min(budget, vocab - 1)
    plan = tree_ops.TreePlan(budget, k, depth, device)
    top = torch.log_softmax(logits, -1).topk(k)
    want = tree_ops.build_tree(plan, torch.tensor([9], device=device), top.indices, top.values)
    packed = torch.zeros(budget + 1, (budget + 32) // 32, dtype=torch.int32, device=device)
    got = TritonTree(plan, vocab, torch.device(device), packed=packed).build(torch.tensor([9], device=device), logits)
    assert torch.equal(packed, pack_tree_mask(got.visible)), seed
    if device == "cpu":  # small cases: no near-ties, so float32 and float64 scores order alike
        for name in ("tokens", "parents", "depths", "visible"):
            assert torch.equal(getattr(got, name), getattr(want, name)), (seed, name)
    else:  # float32 vs float64 sums may swap near-tied nodes: same objective, valid tree
        lp = dict(((d, int(t)), float(v)) for d in range(depth) for t, v in zip(top.indices[d], top.values[d]))
        def mass(tree):
            toks, par, dep = tree.tokens.tolist(), tree.parents.tolist(), tree.depths.tolist()
            score = [0.0] * len(toks)
            for i in range(1, len(toks)):
                assert par[i] < i and dep[i] == dep[par[i]] + 1 and toks[i] >= 0
                score[i] = score[par[i]] + lp[(dep[i] - 1, toks[i])]
            return sum(torch.tensor(score[1:], dtype=torch.float64).exp().tolist())
        assert abs(mass(got) - mass(want)) <= 1e-6 * mass(want), seed
        assert torch.equal(got.visible, tree_ops.ancestors(got.parents, depth)), seed
    # The context-lookup branch: buffers with `depth` slots after the B nodes (or more: a branch deeper
    # than the drafted tree), a text that repeats (several 1024-token search chunks on the GPU),
    # against tree_ops.graft on the same built tree.
    slots = depth if seed % 2 == 0 else 2 * depth + 3
    n = budget + 1 + slots
    out = tree_ops.DeviceTree(*(torch.full((n,), 7, device=device) for _ in range(3)),
                              torch.ones(n, n, dtype=torch.bool, device=device))
    packed = torch.zeros(n, (n + 31) // 32, dtype=torch.int32, device=device)
    tt = TritonTree(plan, vocab, torch.device(device), out, packed)
    tt.build(torch.tensor([9], device=device), logits)
    want = tree_ops.DeviceTree(*(x.clone() for x in (out.tokens, out.parents, out.depths, out.visible)))
    text = torch.randint(0, 6, (300 if device == "cpu" else 2500,), generator=g)
    text = torch.where(text == 5, 9, text)
    text[-1] = 9  # the root (the bonus) is the text's last token
    hist = torch.cat([text, torch.full((40,), 77)]).to(device)
    last, ngram = torch.tensor([text.shape[0] - 1], device=device), 1 + seed % 3
    chain = tree_ops.context_chain(hist, last, ngram, slots)
    tree_ops.graft(want, chain)
    tt.graft(hist, last, ngram)
    for name in ("tokens", "parents", "depths", "visible"):
        assert torch.equal(getattr(out, name), getattr(want, name)), (seed, name, "graft")
    assert torch.equal(packed, pack_tree_mask(out.visible)), (seed, "graft")
    new = int((out.tokens[budget + 1 :] >= 0).sum())
    added += new
    reused += int(chain[0] >= 0 and new < slots)  # the branch ran along drafted nodes first
assert added > 0 and reused > 0, ("no lookup branch added a node or reused one", added, reused)
print("ok", len(cases))
"""


LAYER_CHECK = """
import sys, torch
from engine.runtime import MODELS_DIR, load_decoder
from engine.fast.forward import FusedDrafter, FusedTarget
device = sys.argv[1]
dec = load_decoder(MODELS_DIR / "tiny" / "target", MODELS_DIR / "tiny" / "draft", device=device, dtype="float32")
cfg = dec.target.config
def target_pass(fused, t):
    ids = torch.randint(0, cfg.vocab_size, (t,), generator=torch.Generator().manual_seed(t)).to(device)
    pos = torch.arange(30, 30 + t, device=device)
    kv = torch.randn(cfg.num_hidden_layers, 2, 128, cfg.num_key_value_heads, cfg.head_dim,
                     generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.rand(t, 64, generator=torch.Generator().manual_seed(2)).to(device) < 0.7
    mask[:, 0] = True
    h, f = fused.forward(ids, pos, kv, pos, 64, mask, [0, 2])
    return h, f, kv
def draft_pass(fused, t):
    d = dec.drafter.config
    g = torch.Generator().manual_seed(3)
    ids, feats = torch.randint(0, cfg.vocab_size, (t,), generator=g), torch.randn(t, 2 * d.hidden_size, generator=g)
    dkv = torch.randn(d.num_hidden_layers, 2, 128, d.num_key_value_heads, d.head_dim, generator=g).to(device)
    ctx_pos, block_pos = torch.arange(40, 40 + t, device=device), torch.arange(43, 43 + t, device=device)
    mask = torch.arange(64, device=device)[None, :].expand(t, -1) < 43 + t
    h = fused.forward(ids.to(device), block_pos, feats.to(device), ctx_pos, dkv, 64, mask)
    past = torch.tensor(43 + t, device=device)  # the kernel's form of the same visibility
    return h, dkv, past
with torch.inference_mode():
    for t in (1, 7, 33):  # one row, a short tree, more rows than one tile
        want = target_pass(FusedTarget(dec.target), t)
        fused = FusedTarget(dec.target)
        fused.triton = fused.triton_mlp = True
        got = target_pass(fused, t)
        for a, b in zip(want, got):
            assert (a - b).abs().max() < 1e-4, (t, (a - b).abs().max())
    for t in (4, 8):
        embed = dec.target.model.embed_tokens.weight
        want = draft_pass(FusedDrafter(dec.drafter, embed), t)
        fused = FusedDrafter(dec.drafter, embed)
        fused.triton = fused.triton_mlp = True
        got = draft_pass(fused, t)
        for a, b in zip(want[:2], got[:2]):
            assert (a - b).abs().max() < 1e-4, (t, (a - b).abs().max())
        d = dec.drafter.config
        g = torch.Generator().manual_seed(3)
        ids, feats = torch.randint(0, cfg.vocab_size, (t,), generator=g), torch.randn(t, 2 * d.hidden_size, generator=g)
        dkv = torch.randn(d.num_hidden_layers, 2, 128, d.num_key_value_heads, d.head_dim, generator=g).to(device)
        h = fused.forward(ids.to(device), torch.arange(43, 43 + t, device=device), feats.to(device),
                          torch.arange(40, 40 + t, device=device), dkv, 64 + t, None,
                          (want[2], None))
        assert (h - want[0]).abs().max() < 1e-4, (t, (h - want[0]).abs().max())
import torch.nn.functional as F
from engine.fast.linear_triton import linear
final, head = dec.target.model.norm, dec.target.lm_head.weight  # the LM head: norm, matmul, ban in one launch
ban = torch.zeros(cfg.vocab_size, device=device)
ban[[0, 5]] = float("-inf")
for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 0.05)) if device == "cuda" else ((torch.float32, 1e-4),):
    w, nw = head.to(dtype), final.weight.to(dtype)
    for t, block_n in ((1, 64), (15, 32), (65, 64)):  # (the fast path's head takes 64 columns per program)
        h = torch.randn(t, cfg.hidden_size, generator=torch.Generator().manual_seed(t)).to(device, dtype)
        want = F.linear(F.rms_norm(h, (cfg.hidden_size,), nw, final.eps).float(), w.float(), ban)
        got = torch.full((t, cfg.vocab_size), 7.0, device=device)
        linear(h, w, norm=nw, eps=final.eps, bias=ban, out=got, block_n=block_n)
        assert torch.isinf(got[:, [0, 5]]).all(), t
        assert (got[:, 6:] - want[:, 6:]).abs().max() < tol * want[:, 6:].abs().max(), (dtype, t)
from engine.kernels.tree_attention import tree_attention
g = torch.Generator().manual_seed(4)  # the kernel itself, empty tree: rows [0, past) visible, nothing after
q, k, v = (torch.randn(1, n, h, 32, generator=g).to(device) for n, h in ((8, 4), (80, 2), (80, 2)))
empty = torch.zeros(8, 1, dtype=torch.int32, device=device)
got = tree_attention(q, k, v, torch.tensor(50, device=device), empty, impl="triton")
want = tree_attention(q, k[:, :50], v[:, :50], 42, torch.ones(8, 8, dtype=torch.bool, device=device), impl="torch")
assert (got - want).abs().max() < 1e-4, (got - want).abs().max()
for past in (torch.tensor(50, device=device), 50):  # no mask at all: rows [0, past), no tree loop
    got = tree_attention(q, k, v, past, None, impl="triton")
    assert (got - want).abs().max() < 1e-4, (got - want).abs().max()
    ref = tree_attention(q, k, v, past, None, impl="torch")
    assert torch.equal(ref, tree_attention(q, k, v, 50, empty, impl="torch"))
print("ok layers")
"""


PATH_CHECK = """
import torch
from engine.decode import Decoder
from engine.runtime import MODELS_DIR, load_decoder
from engine.sampling import SamplingParams
dec = load_decoder(MODELS_DIR / "tiny" / "target", MODELS_DIR / "tiny" / "draft", device="cpu", dtype="float32")
fast = Decoder(dec.target, dec.drafter, dec.tokenizer, budget=16, max_context=1024, fast=True).fast
for fused in (fast.fused_target, fast.fused_drafter):  # every switch FastPath turns on with CUDA
    fused.triton = fused.triton_mlp = True
fast.use_triton_tree = fast.triton_commit = fast.tree_attention = fast.draft_kernel = True
switched = Decoder(dec.target, dec.drafter, dec.tokenizer, budget=16, max_context=1024, fast=True)
switched.fast = fast
params = SamplingParams(max_tokens=16, ignore_eos=True)
for prompt in ("class Stack:\\n    def push(self, x):\\n",):  # interpreted kernels are slow: one prompt
    for alg, budget in (("ar", 0), ("dflash", 0), ("ddtree", 12)):
        want = dec.generate_text(prompt, params, algorithm=alg, budget=budget)
        got = switched.generate_text(prompt, params, algorithm=alg, budget=budget)
        assert got.tokens == want.tokens, (alg, budget, got.tokens, want.tokens)
        assert got.stats.accept_lengths == want.stats.accept_lengths, (alg, budget)
assert fast.triton_trees, "the Triton tree build did not run"
print("ok path")
"""


# ddtree with the context-lookup branch (the Triton graft after the build): the reference's rounds.
# A script of its own: each ddtree round's interpreted tree build takes 15–30 s on the CPU machine.
LOOKUP_PATH_CHECK = """
from engine.decode import Decoder
from engine.runtime import MODELS_DIR, load_decoder
from engine.sampling import SamplingParams
dec = load_decoder(MODELS_DIR / "tiny" / "target", MODELS_DIR / "tiny" / "draft", device="cpu", dtype="float32")
# (a branch of 9 tokens, deeper than the drafted tree's 7: rounds may commit more than a block)
looked = Decoder(dec.target, dec.drafter, dec.tokenizer, budget=12, max_context=1024, fast=True, lookup=2,
                 lookup_tokens=9)
for fused in (looked.fast.fused_target, looked.fast.fused_drafter):
    fused.triton = fused.triton_mlp = True
looked.fast.use_triton_tree = looked.fast.triton_commit = looked.fast.tree_attention = looked.fast.draft_kernel = True
ref = Decoder(dec.target, dec.drafter, dec.tokenizer, budget=12, max_context=1024, lookup=2, lookup_tokens=9)
prompt = "    def push(self, x):\\n        self.items.append(x)\\n    def pop(self):\\n"
want = ref.generate_text(prompt, SamplingParams(max_tokens=12, ignore_eos=True), algorithm="ddtree", budget=12)
got = looked.generate_text(prompt, SamplingParams(max_tokens=12, ignore_eos=True), algorithm="ddtree", budget=12)
assert got.tokens == want.tokens and got.stats.accept_lengths == want.stats.accept_lengths, "lookup"
assert got.stats.drafted_nodes == want.stats.drafted_nodes, "lookup"
print("ok lookup path")
"""


COMMIT_CHECK = """
import sys, random, torch
from engine.fast import tree_ops
from engine.fast.commit_triton import commit
device = sys.argv[1]
random.seed(0)
layers, rows, kvh, hd, width = 3, 200, 2, 64, 96
lengths = {}
# (block, span): paths as long as a block, and longer ones (a lookup branch deeper than the drafted
# tree: the kernel moves the path in chunks of 16 rows)
cases = [(16, 16, b) for b in (1, 4, 16, 40, 64, 100, 8, 30)] + [(8, 32, b) for b in (40, 64, 100, 120)]
for seed, (block, span, budget) in enumerate(cases):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(span - 1, 60, generator=g) * 6
    if span > block:  # one sure token per depth: the tree holds a chain as deep as the span
        logits[torch.arange(span - 1), torch.randint(0, 60, (span - 1,), generator=g)] += 40
    logits = logits.to(device)
    top = torch.log_softmax(logits, -1).topk(min(budget, 60))
    plan = tree_ops.TreePlan(budget, min(budget, 60), span - 1, device)
    tree = tree_ops.build_tree(plan, torch.tensor([5], device=device), top.indices, top.values)
    t, tok, par = budget + 1, tree.tokens.tolist(), tree.parents.tolist()
    choices = torch.randint(0, 60, (t,), generator=g)
    for i in range(t):  # the target usually picks one of the node's children
        kids = [tok[c] for c in range(1, t) if par[c] == i and tok[c] >= 0]
        if kids and random.random() < (0.8 if span == block else 0.97):
            choices[i] = random.choice(kids)
    choices = choices.to(device)
    kv = torch.randn(layers, 2, rows, kvh, hd, device=device)
    tfeats = torch.randn(t, width, device=device)
    start = torch.tensor([random.randrange(100)], device=device)
    want_kv = kv.clone()
    w = tree_ops.walk(tree, choices, span)
    tree_ops.compact(want_kv, start, w.path)
    n = int(w.count)
    got_kv, feats = kv.clone(), torch.zeros(span, width, device=device)
    result, st = torch.zeros(span + 3, dtype=torch.long, device=device), start.clone()
    bonus, n_new = torch.zeros(1, dtype=torch.long, device=device), torch.zeros(1, dtype=torch.long, device=device)
    block_ids = torch.full((block,), 3, device=device)
    draft_in = torch.zeros(block + span + 1, dtype=torch.long, device=device)
    hist = torch.full((rows,), 77, dtype=torch.long, device=device)
    commit(tree.tokens, tree.parents, tree.depths, choices, tfeats, got_kv, feats, result, st, bonus, n_new, block_ids,
           draft_in, hist, block)
    end = int(start) + n
    j = torch.arange(span, device=device)  # the next draft's inputs: block at end + j, new context at start + j
    want_in = torch.cat([end + j[:block], int(start) + j, torch.tensor([end + block], device=device)])
    assert torch.equal(draft_in, want_in), seed
    assert block_ids.tolist() == [int(w.bonus)] + [3] * (block - 1), seed
    assert torch.equal(got_kv[:, :, :end], want_kv[:, :, :end]), seed
    assert torch.equal(feats[:n], tfeats[w.path][:n]), seed
    assert result[0] == n and torch.equal(result[1 : 1 + n], tree.tokens[w.path][:n]), seed
    assert result[span + 1] == w.bonus[0] and result[span + 2] == (tree.tokens[1:] >= 0).sum(), seed
    assert int(st) == end and int(bonus) == int(w.bonus) and int(n_new) == n, seed
    s0 = int(start)  # the text: the accepted tokens, then the bonus; nothing else written
    assert torch.equal(hist[s0:end], tree.tokens[w.path][:n]) and int(hist[end]) == int(w.bonus), seed
    assert (hist[:s0] == 77).all() and (hist[end + 1 :] == 77).all(), seed
    lengths.setdefault(span, []).append(n)
assert max(lengths[16]) >= 4 and max(lengths[32]) > 16, lengths  # the walks went deep, past one chunk
from engine.fast.commit_triton import commit_one  # ar's commit
block = 16
result, st = torch.zeros(block + 3, dtype=torch.long, device=device), torch.tensor([5], device=device)
bonus, choice = torch.tensor([3], device=device), torch.zeros(1, dtype=torch.long, device=device)
logits = torch.full((1, 1000), -1.0, device=device)
logits[0, [7, 9]] = 2.0  # a tie: the lowest id wins, as with torch.argmax
logits[0, 0] = float("-inf")
commit_one(logits, choice, result, st, bonus, block)
assert result.tolist() == [1, 3] + [0] * (block - 1) + [7, 0] and int(bonus) == 7 and int(st) == 6, result
assert int(choice) == 7 == int(logits.argmax())
from engine.fast.commit_triton import choices  # a tree pass's choices, one per row
logits = (torch.randn(65, 1000, generator=torch.Generator().manual_seed(9)) * 4).to(device)
logits[3, [5, 600]] = 50.0  # ties: the lowest id wins, as with torch.argmax
logits[:, 2] = float("-inf")
picked = torch.zeros(65, dtype=torch.long, device=device)
choices(logits, picked)
assert torch.equal(picked, logits.argmax(-1)) and int(picked[3]) == 5, picked
print("ok commit")
"""


PDL_CHECK = """
import os, torch
from engine.runtime import MODELS_DIR, load_decoder
from engine.fast.forward import FusedTarget
from engine.kernels import pdl
dec = load_decoder(MODELS_DIR / "small" / "target", None, device="cuda", dtype="bfloat16", algorithm="ar")
cfg = dec.target.config
def chain(t):
    # One target pass over t tree rows after 300 past rows, captured in a CUDA graph and replayed.
    g = torch.Generator().manual_seed(t)
    fused = FusedTarget(dec.target)
    fused.triton = fused.triton_mlp = True
    ids = torch.randint(0, cfg.vocab_size, (t,), generator=g).cuda()
    pos = torch.arange(300, 300 + t, device="cuda")
    kv = torch.randn(cfg.num_hidden_layers, 2, 512, cfg.num_key_value_heads, cfg.head_dim, generator=g)
    kv = kv.to(torch.bfloat16).cuda()
    bits = torch.randint(-2**31, 2**31 - 1, (t, (t + 31) // 32), generator=g, dtype=torch.int32).cuda()
    past = torch.tensor(300, device="cuda")
    run = lambda: fused.forward(ids, pos, kv, pos, 512, None, [1, 3], tree=(past, bits))
    with torch.inference_mode():
        run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            h, f = run()
        outs = []
        for _ in range(3):
            graph.replay()
            outs.append((h.clone(), f.clone(), kv.clone()))
        torch.cuda.synchronize()
    return outs
results = {}
for flag in ("1", "0"):
    os.environ["ENGINE_PDL"] = flag
    pdl._supported.cache_clear()
    assert pdl.options(torch.device("cuda"))["GDC"] == (flag == "1")
    results[flag] = [chain(t) for t in (1, 65)]
for with_pdl, without in zip(results["1"], results["0"]):
    for a, b in zip(with_pdl, without):
        for x, y in zip(a, b):
            assert torch.equal(x, y)
print("ok pdl")
"""


def run_check(device: str, env: dict[str, str], script: str = CHECK) -> str:
    run = subprocess.run(
        [sys.executable, "-c", script, device], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=900,  # the interpreted fast path: 2.5 minutes alone on the 2-core CPU machine, more under load
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_the_interpreted_kernels_build_the_pytorch_tree() -> None:
    assert "ok 6" in run_check("cpu", {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_compiled_kernels_build_the_pytorch_tree_on_the_gpu() -> None:
    assert "ok 6" in run_check("cuda", {})


def test_the_interpreted_layer_kernels_match_the_pytorch_ops() -> None:
    assert "ok layers" in run_check("cpu", {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}, LAYER_CHECK)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_compiled_layer_kernels_match_the_pytorch_ops_on_the_gpu() -> None:
    assert "ok layers" in run_check("cuda", {}, LAYER_CHECK)


def test_the_fast_path_with_every_kernel_interpreted_generates_the_reference_tokens() -> None:
    assert "ok path" in run_check("cpu", {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}, PATH_CHECK)


def test_the_fast_path_with_every_kernel_interpreted_generates_the_reference_tokens_with_a_lookup_branch() -> None:
    env = {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    assert "ok lookup path" in run_check("cpu", env, LOOKUP_PATH_CHECK)


def test_the_interpreted_commit_kernel_matches_walk_and_compaction() -> None:
    assert "ok commit" in run_check("cpu", {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}, COMMIT_CHECK)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_compiled_commit_kernel_matches_walk_and_compaction_on_the_gpu() -> None:
    assert "ok commit" in run_check("cuda", {}, COMMIT_CHECK)


def test_programmatic_dependent_launch_is_off_on_the_cpu() -> None:
    from engine.kernels import pdl

    assert pdl.options(torch.device("cpu")) == {"GDC": False}


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9, reason="needs a Hopper-class GPU"
)
def test_kernels_chained_by_programmatic_dependent_launch_compute_what_they_compute_without() -> None:
    # Same kernels, same order: replays of a captured target pass are bit-identical with PDL on and off.
    assert "ok pdl" in run_check("cuda", {}, PDL_CHECK)
