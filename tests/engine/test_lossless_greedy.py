"""At T = 0 in fp32, ar, dflash and ddtree emit identical tokens."""

from __future__ import annotations

import pytest

from engine.decode import Decoder
from engine.sampling import SamplingParams
from engine.tree import Tree

CONFIGS = [("dflash", 0), ("ddtree", 1), ("ddtree", 4), ("ddtree", 16), ("ddtree", 64)]


def test_it_emits_the_same_tokens_with_every_algorithm(decoder: Decoder, prompts: list[str]) -> None:
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    taus: dict[tuple[str, int], list[float]] = {c: [] for c in CONFIGS}
    for prompt in prompts:
        reference = decoder.generate_text(prompt, params, algorithm="ar").tokens
        assert len(reference) == 48
        for alg, budget in CONFIGS:
            g = decoder.generate_text(prompt, params, algorithm=alg, budget=budget)
            assert g.tokens == reference, (alg, budget, prompt[-60:])
            taus[(alg, budget)].append(g.stats.tau)
    mean = {c: sum(v) / len(v) for c, v in taus.items()}
    # The test only means something if drafts are accepted, deeper with bigger trees.
    assert mean[("dflash", 0)] > 1.2
    assert mean[("ddtree", 64)] > mean[("ddtree", 4)] > mean[("ddtree", 1)] > 1.0


class ForcedTreeDecoder(Decoder):
    """Puts the true continuation on the *second* child at every depth, a decoy on the first."""

    reference: list[int] = []
    prompt_len = 0

    def _draft_tree(self, algorithm, budget, bonus, start, feats, sampler):  # type: ignore[no-untyped-def]
        j = start - self.prompt_len  # index of the bonus token in the output
        nxt = self.reference[j + 1 : j + 4]
        tokens, parents, depths = [bonus], [-1], [0]
        parent = 0
        for d, tok in enumerate(nxt, start=1):
            decoy = 4 + (tok + 1) % 1000
            tokens += [decoy, tok]
            parents += [parent, parent]
            depths += [d, d]
            parent = len(tokens) - 1
        return Tree(tokens, parents, depths), 0.0


def test_it_commits_branched_paths_correctly(decoder: Decoder, prompts: list[str]) -> None:
    forced = ForcedTreeDecoder(decoder.target, decoder.drafter, decoder.tokenizer, max_context=1024)
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    for prompt in prompts[:3]:
        ids = decoder.tokenizer.encode(prompt)
        forced.reference = decoder.generate(ids, params, algorithm="ar").tokens
        forced.prompt_len = len(ids)
        g = forced.generate(ids, params, algorithm="ddtree", budget=6)
        assert g.tokens == forced.reference
        # Every full round accepts root + 3 second-child nodes, so rows really had to move.
        assert g.stats.rounds >= 5
        assert g.stats.accept_lengths[:-1] == [4] * (g.stats.rounds - 1)


@pytest.mark.parametrize("window", [8, 64])
def test_it_stays_lossless_with_a_draft_window(decoder: Decoder, prompts: list[str], window: int) -> None:
    windowed = Decoder(decoder.target, decoder.drafter, decoder.tokenizer, draft_window=window, max_context=1024)
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    for prompt in prompts[:4]:
        reference = decoder.generate_text(prompt, params, algorithm="ar").tokens
        assert windowed.generate_text(prompt, params, algorithm="ddtree", budget=16).tokens == reference
