"""At T > 0, ddtree's walk draws one token per node from the target, so its output distribution is ar's.

A χ² two-sample test on the token emitted at a position that ddtree fills from a verified tree
(not from prefill) — with a negative control that proves the test catches a biased walk.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import engine.decode
from engine.decode import Decoder
from engine.sampling import SamplingParams
from engine.tree import Tree

PROMPT = "    def __init__(self, name, value=None):\n        self."
SAMPLES = 500


def emitted(decoder: Decoder, algorithm: str, position: int, first_seed: int) -> Counter[int]:
    """Independent samples: each algorithm gets its own seeds, since equal seeds would correlate them."""
    ids = decoder.tokenizer.encode(PROMPT)
    counts: Counter[int] = Counter()
    for seed in range(first_seed, first_seed + SAMPLES):
        params = SamplingParams(max_tokens=position + 1, temperature=1.0, seed=seed, ignore_eos=True)
        counts[decoder.generate(ids, params, algorithm=algorithm, budget=16).tokens[position]] += 1
    return counts


def chi2_p_value(a: Counter[int], b: Counter[int]) -> float:
    """Homogeneity test of two samples; rare categories are pooled so expected counts are ≥ 5."""
    na, nb = sum(a.values()), sum(b.values())
    pooled = a + b
    common = [t for t, c in pooled.items() if c * min(na, nb) / (na + nb) >= 5]
    cells = [(a[t], b[t]) for t in common]
    cells.append((na - sum(x for x, _ in cells), nb - sum(y for _, y in cells)))
    cells = [c for c in cells if sum(c)]
    stat = 0.0
    for oa, ob in cells:
        total = oa + ob
        ea, eb = total * na / (na + nb), total * nb / (na + nb)
        stat += (oa - ea) ** 2 / ea + (ob - eb) ** 2 / eb
    dof = len(cells) - 1
    assert dof >= 3, "the target distribution should be spread over several tokens"
    return float(torch.special.gammaincc(torch.tensor(dof / 2), torch.tensor(stat / 2)))


@pytest.fixture(scope="module")
def ar_counts(decoder: Decoder) -> Counter[int]:
    return emitted(decoder, "ar", 2, first_seed=0)


def test_it_samples_the_target_distribution_through_the_tree(decoder: Decoder, ar_counts: Counter[int]) -> None:
    assert chi2_p_value(ar_counts, emitted(decoder, "ddtree", 2, first_seed=10_000)) > 0.01


def test_it_would_catch_a_walk_biased_towards_the_draft(
    decoder: Decoder, ar_counts: Counter[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = engine.decode.walk

    def biased(tree: Tree, choices: list[int]) -> tuple[list[int], int]:
        # Accept the drafter's first child whenever the target's draw fails to match: a classic bug.
        accepted, bonus = honest(tree, choices)
        last = accepted[-1]
        first_child = next((i for i in range(last + 1, len(tree.tokens)) if tree.parents[i] == last), None)
        if first_child is not None:
            return accepted + [first_child], choices[first_child]
        return accepted, bonus

    monkeypatch.setattr(engine.decode, "walk", biased)
    assert chi2_p_value(ar_counts, emitted(decoder, "ddtree", 2, first_seed=10_000)) < 1e-4
