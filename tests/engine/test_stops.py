"""Stops: max_tokens, EOS (unless ignore_eos), stop strings; special ids are never emitted."""

from __future__ import annotations

import pytest

from engine.decode import Decoder
from engine.sampling import SamplingParams


@pytest.mark.parametrize("algorithm", ["ar", "dflash", "ddtree"])
def test_it_emits_exactly_max_tokens_when_ignoring_eos(decoder: Decoder, prompts: list[str], algorithm: str) -> None:
    for n in (1, 2, 17, 200):
        g = decoder.generate_text(prompts[0], SamplingParams(max_tokens=n, ignore_eos=True), algorithm=algorithm)
        assert len(g.tokens) == n and g.finish_reason == "length"


@pytest.mark.parametrize("algorithm", ["ar", "ddtree"])
def test_it_stops_at_a_stop_string_and_cuts_the_text_before_it(
    decoder: Decoder, prompts: list[str], algorithm: str
) -> None:
    full = decoder.generate_text(prompts[1], SamplingParams(max_tokens=80, ignore_eos=True), algorithm="ar")
    stop = full.text[30:36]
    assert stop.strip(), "pick a visible stop string"
    g = decoder.generate_text(
        prompts[1], SamplingParams(max_tokens=80, ignore_eos=True, stop=[stop]), algorithm=algorithm
    )
    assert g.finish_reason == "stop"
    assert g.text == full.text[: full.text.index(stop)]
    assert g.tokens == full.tokens[: len(g.tokens)] and len(g.tokens) < len(full.tokens)


def test_it_stops_at_eos_and_does_not_emit_it(decoder: Decoder) -> None:
    eos = decoder.tokenizer.eos_id
    params = SamplingParams(max_tokens=10)
    assert decoder._finish([5, 6, eos, 7], params, prompt_len=3) == ([5, 6], "stop")
    assert decoder._finish([5, 6], params, prompt_len=3) is None
    ignoring = SamplingParams(max_tokens=10, ignore_eos=True)
    assert decoder._finish([5, 6, eos, 7], ignoring, prompt_len=3) is None
    assert decoder._finish(list(range(12)), ignoring, prompt_len=3) == (list(range(10)), "length")


def test_it_ends_with_length_when_the_context_is_full(decoder: Decoder) -> None:
    small = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, max_context=40)
    ids = decoder.tokenizer.encode("import os\nimport sys\n")
    g = small.generate(ids, SamplingParams(max_tokens=500, ignore_eos=True), algorithm="ddtree", budget=8)
    assert g.finish_reason == "length" and len(ids) + len(g.tokens) == 40


def test_it_never_emits_mask_or_special_tokens(decoder: Decoder, prompts: list[str]) -> None:
    banned = set(decoder.banned_ids(SamplingParams(ignore_eos=True)))
    assert decoder.mask_id in banned and decoder.tokenizer.eos_id in banned
    for seed, prompt in enumerate(prompts[:6]):
        for temperature in (0.0, 1.5):
            params = SamplingParams(max_tokens=64, temperature=temperature, seed=seed, ignore_eos=True)
            g = decoder.generate_text(prompt, params, algorithm="ddtree", budget=32)
            assert not banned & set(g.tokens)


def test_it_reports_per_round_statistics(decoder: Decoder, prompts: list[str]) -> None:
    g = decoder.generate_text(prompts[2], SamplingParams(max_tokens=64, ignore_eos=True), algorithm="ddtree", budget=16)
    s = g.stats
    assert s.rounds == len(s.accept_lengths) == len(s.round_stage_seconds) > 0
    assert sum(s.histogram()) == s.rounds and len(s.histogram()) == decoder.block_size
    assert s.drafted_nodes == 16 * s.rounds
    assert sum(s.accepted_per_depth) == sum(s.accept_lengths) - s.rounds == s.accepted_drafts
    # 1 token from prefill plus τ per round, truncated to max_tokens in the last round
    assert 1 + sum(s.accept_lengths) >= len(g.tokens) > sum(s.accept_lengths[:-1])
    assert all(s.stage_seconds[k] > 0 for k in ("draft", "tree_build", "verify", "commit"))
    assert s.prefill_seconds > 0 and s.decode_seconds >= sum(s.stage_seconds.values())
    assert s.to_dict()["tau"] == pytest.approx(s.tau)


def test_it_can_be_cancelled_between_rounds(decoder: Decoder, prompts: list[str]) -> None:
    seen: list[int] = []

    def progress(tokens: list[int]) -> bool:
        seen.append(len(tokens))
        return len(tokens) < 20

    g = decoder.generate_text(prompts[0], SamplingParams(max_tokens=200, ignore_eos=True), on_progress=progress)
    assert g.finish_reason == "cancelled" and 20 <= len(g.tokens) < 200
    assert seen == sorted(seen) and seen[-1] == len(g.tokens)
