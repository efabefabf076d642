"""The fast path (engine.fast) generates exactly what the reference decoder generates.

On the CPU it runs eagerly (no CUDA graphs), fp32: every token, every round's τ and the finish
reason must equal the reference path's. The GPU tests (skipped without CUDA) run the captured
graphs in fp32 against the reference on the same device.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from engine.decode import Decoder
from engine.runtime import load_decoder
from engine.sampling import SamplingParams

CONFIGS = [("ar", 0), ("dflash", 0), ("ddtree", 1), ("ddtree", 4), ("ddtree", 16), ("ddtree", 48)]


@pytest.fixture(scope="module")
def fast(decoder: Decoder) -> Decoder:
    return Decoder(decoder.target, decoder.drafter, decoder.tokenizer, budget=16, max_context=1024, fast=True)


def test_the_reference_decoder_has_no_fast_path_on_the_cpu(decoder: Decoder) -> None:
    assert decoder.fast is None


def test_it_generates_the_reference_tokens_and_rounds(decoder: Decoder, fast: Decoder, prompts: list[str]) -> None:
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    for prompt in prompts[:5]:
        for alg, budget in CONFIGS:
            want = decoder.generate_text(prompt, params, algorithm=alg, budget=budget)
            got = fast.generate_text(prompt, params, algorithm=alg, budget=budget)
            assert got.tokens == want.tokens, (alg, budget)
            assert got.stats.accept_lengths == want.stats.accept_lengths, (alg, budget)
            assert got.stats.accepted_per_depth == want.stats.accepted_per_depth
            assert got.stats.drafted_nodes == want.stats.drafted_nodes
    assert fast.fast is not None and not fast.fast.graphs.graphs  # eager on the CPU


def test_the_tree_attention_switch_generates_the_reference_tokens(decoder: Decoder, prompts: list[str]) -> None:
    # On the CPU tree_attention runs its PyTorch reference; this checks the wiring (past, packed mask,
    # the draft pass's block as past rows).
    switched = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, budget=16, max_context=1024, fast=True)
    assert switched.fast is not None
    switched.fast.tree_attention = switched.fast.draft_kernel = True
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    for alg, budget in [("ar", 0), ("dflash", 0), ("ddtree", 16)]:
        want = decoder.generate_text(prompts[3], params, algorithm=alg, budget=budget)
        assert switched.generate_text(prompts[3], params, algorithm=alg, budget=budget).tokens == want.tokens


@pytest.mark.parametrize("lookup_tokens", [None, 7])
def test_the_lookup_branch_generates_the_reference_tokens_and_rounds(
    decoder: Decoder, prompts: list[str], lookup_tokens: int | None
) -> None:
    kw = {"budget": 16, "max_context": 1024, "lookup": 3, "lookup_tokens": lookup_tokens}
    ref = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, **kw)  # type: ignore[arg-type]
    fast = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, fast=True, **kw)  # type: ignore[arg-type]
    branch = lookup_tokens or 31  # the default, deeper than the drafted tree (7); or as deep as it
    assert ref.fast is None and fast.fast is not None and fast.nodes_per_round("ddtree", 16) == 16 + branch
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    plain_tau, lookup_tau, longest = 0.0, 0.0, 0
    for prompt in prompts[:4]:
        plain = decoder.generate_text(prompt, params, algorithm="ddtree", budget=16)
        for budget in (1, 16):
            want = ref.generate_text(prompt, params, algorithm="ddtree", budget=budget)
            got = fast.generate_text(prompt, params, algorithm="ddtree", budget=budget)
            assert want.tokens == plain.tokens  # lossless: the branch changes τ, never the text
            assert got.tokens == want.tokens, budget
            assert got.stats.accept_lengths == want.stats.accept_lengths, budget
            assert got.stats.accepted_per_depth == want.stats.accepted_per_depth, budget
            assert got.stats.drafted_nodes == want.stats.drafted_nodes, budget
            assert got.stats.budget == want.stats.budget == budget  # the drafter's B; the branch is extra
            longest = max(longest, *want.stats.accept_lengths)
        plain_tau += plain.stats.tau
        lookup_tau += want.stats.tau
    assert lookup_tau > plain_tau  # the tiny model's greedy text repeats itself: the branch pays
    assert longest <= 1 + branch
    if branch > decoder.block_size - 1:  # a branch deeper than the drafted tree: a round commits more than a block
        assert longest > decoder.block_size


def test_it_stops_like_the_reference(decoder: Decoder, fast: Decoder, prompts: list[str]) -> None:
    for prompt in prompts[8:10]:
        ref_text = decoder.generate_text(prompt, SamplingParams(max_tokens=30, ignore_eos=True)).text
        stop = ref_text[10:14]
        for params in (SamplingParams(max_tokens=30, stop=[stop]), SamplingParams(max_tokens=7)):
            want = decoder.generate_text(prompt, params, algorithm="ddtree", budget=16)
            got = fast.generate_text(prompt, params, algorithm="ddtree", budget=16)
            assert (got.tokens, got.text, got.finish_reason) == (want.tokens, want.text, want.finish_reason)


def test_it_reports_stage_times_for_every_round(fast: Decoder, prompts: list[str]) -> None:
    g = fast.generate_text(prompts[0], SamplingParams(max_tokens=20, ignore_eos=True), algorithm="ddtree", budget=8)
    assert len(g.stats.round_stage_seconds) == g.stats.rounds > 0
    assert all(s > 0 for s in g.stats.stage_seconds.values())


def test_a_round_queued_ahead_changes_nothing(decoder: Decoder, prompts: list[str]) -> None:
    # What CUDA does (the next round queued before this one's result is read), here on the CPU, where
    # the queued round has already run when the result is read: same tokens, rounds and stops, and
    # the round past the end of one generation does not leak into the next.
    reference = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, budget=16, max_context=200)
    ahead = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, budget=16, max_context=200, fast=True)
    assert ahead.fast is not None and reference.fast is None
    ahead.fast.lookahead = 1
    stop = reference.generate_text(prompts[8], SamplingParams(max_tokens=30, ignore_eos=True)).text[10:14]
    cases = [
        (prompts[0], SamplingParams(max_tokens=32, ignore_eos=True)),
        (prompts[8], SamplingParams(max_tokens=30, stop=[stop])),
        (prompts[1], SamplingParams(max_tokens=7)),
        (prompts[2], SamplingParams(max_tokens=500, ignore_eos=True)),  # ends at max_context
    ]
    for prompt, params in cases:
        for alg, budget in [("ar", 0), ("dflash", 0), ("ddtree", 16)]:
            want = reference.generate_text(prompt, params, algorithm=alg, budget=budget)
            got = ahead.generate_text(prompt, params, algorithm=alg, budget=budget)
            assert (got.tokens, got.finish_reason) == (want.tokens, want.finish_reason), (alg, params)
            assert got.stats.accept_lengths == want.stats.accept_lengths, (alg, params)
    assert want.finish_reason == "length" and len(want.tokens) < 500  # the last case did hit max_context


def test_rounds_are_queued_ahead_only_when_surely_needed(decoder: Decoder, prompts: list[str]) -> None:
    # A round queued past max_tokens would be GPU work nobody reads, which the next request waits for:
    # queued ahead only while max_tokens stays out of reach even if every queued round commits its most.
    ahead = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, budget=16, max_context=512, fast=True)
    assert ahead.fast is not None
    ahead.fast.lookahead = 1
    launched: list[int] = []
    queued_at_read: list[int] = []
    queue, read = ahead.fast._queue_round, ahead.fast._read

    def spy_queue(*args, **kwargs):  # type: ignore[no-untyped-def]
        launched.append(1)
        return queue(*args, **kwargs)

    def spy_read(*args, **kwargs):  # type: ignore[no-untyped-def]
        queued_at_read.append(len(launched))
        return read(*args, **kwargs)

    ahead.fast._queue_round, ahead.fast._read = spy_queue, spy_read  # type: ignore[method-assign]
    for (alg, budget), prompt, most in itertools.product([("dflash", 0), ("ddtree", 16)], prompts[:2], (30, 47)):
        launched.clear()
        queued_at_read.clear()
        params = SamplingParams(max_tokens=most, ignore_eos=True)
        g = ahead.generate_text(prompt, params, algorithm=alg, budget=budget)
        assert len(g.tokens) == most
        assert queued_at_read[0] == 2, alg  # the second round was queued before the first was read
        assert len(launched) == g.stats.rounds, (alg, most)  # and none past the end


def test_ar_runs_several_steps_per_round_and_none_past_max_tokens(fast: Decoder, prompts: list[str]) -> None:
    # Steps per round are powers of two up to AR_STEPS, as many as surely fit before max_tokens.
    assert fast.fast is not None
    steps: list[int] = []
    queue = fast.fast._queue_round

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        steps.append(args[-1])
        return queue(*args, **kwargs)

    fast.fast._queue_round = spy  # type: ignore[method-assign]
    try:
        g = fast.generate_text(prompts[0], SamplingParams(max_tokens=14, ignore_eos=True), algorithm="ar")
    finally:
        del fast.fast._queue_round
    assert steps == [8, 4, 1] and len(g.tokens) == 14  # the prefill's token, then 8 + 4 + 1
    assert len(g.stats.round_stage_seconds) == 13 and all(r[2] > 0 for r in g.stats.round_stage_seconds)  # verify


def test_sampling_falls_back_to_the_reference_path(decoder: Decoder, fast: Decoder, prompts: list[str]) -> None:
    params = SamplingParams(max_tokens=24, temperature=0.8, seed=3, ignore_eos=True)
    want = decoder.generate_text(prompts[0], params, algorithm="ddtree", budget=8)
    got = fast.generate_text(prompts[0], params, algorithm="ddtree", budget=8)
    assert got.tokens == want.tokens


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_the_cuda_graphs_generate_the_reference_tokens_in_fp32(tiny_dirs, prompts: list[str]) -> None:  # type: ignore[no-untyped-def]
    reference = load_decoder(*tiny_dirs, device="cuda", dtype="float32", max_context=1024)
    graphs = Decoder(reference.target, reference.drafter, reference.tokenizer, max_context=1024, fast=True)
    reference.fast = None
    assert graphs.fast is not None and graphs.fast.graphs.enabled
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    for prompt in prompts[:6]:
        for alg, budget in CONFIGS:
            want = reference.generate_text(prompt, params, algorithm=alg, budget=budget)
            got = graphs.generate_text(prompt, params, algorithm=alg, budget=budget)
            assert got.tokens == want.tokens, (alg, budget)
    assert graphs.fast.graphs.graphs, "no CUDA graph was captured"
    # ddtree with the context-lookup branch (the Triton graft, under the graphs): the reference's rounds
    looked = Decoder(reference.target, reference.drafter, reference.tokenizer, max_context=1024, fast=True, lookup=3)
    ref = Decoder(reference.target, reference.drafter, reference.tokenizer, max_context=1024, fast=False, lookup=3)
    for prompt in prompts[:6]:
        for budget in (4, 48):
            want = ref.generate_text(prompt, params, algorithm="ddtree", budget=budget)
            got = looked.generate_text(prompt, params, algorithm="ddtree", budget=budget)
            assert got.tokens == want.tokens and got.stats.accept_lengths == want.stats.accept_lengths, budget
    # a branch of 40 tokens, deeper than the drafted tree (the commit kernel's path in chunks)
    looked = Decoder(reference.target, reference.drafter, reference.tokenizer, max_context=1024, fast=True, lookup=3,
                     lookup_tokens=40)  # fmt: skip
    ref = Decoder(reference.target, reference.drafter, reference.tokenizer, max_context=1024, fast=False, lookup=3,
                  lookup_tokens=40)  # fmt: skip
    longest = 0
    for prompt in prompts[:6]:
        want = ref.generate_text(prompt, params, algorithm="ddtree", budget=16)
        got = looked.generate_text(prompt, params, algorithm="ddtree", budget=16)
        assert got.tokens == want.tokens and got.stats.accept_lengths == want.stats.accept_lengths
        longest = max(longest, *want.stats.accept_lengths)
    assert longest > 16, "no round went past the first chunk of the commit kernel's path"


@cuda
def test_the_device_tree_build_runs_under_a_cuda_graph() -> None:
    from engine.fast import tree_ops

    torch.manual_seed(0)
    plan = tree_ops.TreePlan(64, 64, 15, "cuda")
    logits = torch.randn(15, 500, device="cuda")
    root = torch.tensor([1], device="cuda")
    top = torch.log_softmax(logits, -1).topk(64)
    want = tree_ops.build_tree(plan, root, top.indices, top.values)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = tree_ops.build_tree(plan, root, top.indices, top.values)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(got.tokens, want.tokens) and torch.equal(got.visible, want.visible)


@cuda
def test_the_round_graph_times_every_stage_of_every_round(tiny_dirs, prompts: list[str]) -> None:  # type: ignore[no-untyped-def]
    # A round is one CUDA graph with its timing events inside: replayed rounds (the second generation)
    # still report each stage's own time, read before the slot's graph runs again.
    dec = load_decoder(*tiny_dirs, device="cuda", dtype="bfloat16", max_context=1024)
    assert dec.fast is not None and dec.fast.graphs.enabled
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    for alg, budget in (("ar", 0), ("ddtree", 16)):
        dec.generate_text(prompts[0], params, algorithm=alg, budget=budget)  # captures
        g = dec.generate_text(prompts[0], params, algorithm=alg, budget=budget)  # replays
        stages = [2] if alg == "ar" else [0, 1, 2, 3]  # draft, tree_build, verify, commit (ar: verify only)
        assert len(g.stats.round_stage_seconds) == g.stats.rounds > 1
        assert all(r[i] > 0 for r in g.stats.round_stage_seconds for i in stages), alg
        assert sum(map(sum, g.stats.round_stage_seconds)) <= g.stats.decode_seconds, alg
