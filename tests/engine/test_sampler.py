from __future__ import annotations

import torch

from engine.sampling import Sampler, SamplingParams


def probs(**kw: object) -> torch.Tensor:
    sampler = Sampler(SamplingParams(temperature=1.0, seed=0, **kw), [], torch.device("cpu"))  # type: ignore[arg-type]
    return sampler.probabilities(torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])))[0]


def test_it_keeps_only_the_top_k_tokens() -> None:
    p = probs(top_k=2)
    assert torch.allclose(p, torch.tensor([0.625, 0.375, 0.0, 0.0]))


def test_it_keeps_the_smallest_set_reaching_top_p() -> None:
    assert torch.allclose(probs(top_p=0.8), torch.tensor([0.625, 0.375, 0.0, 0.0]))
    assert torch.allclose(probs(top_p=0.81), torch.tensor([0.5, 0.3, 0.15, 0.0]) / 0.95)
    assert probs(top_p=0.1)[0] == 1.0  # the best token always stays


def test_it_never_chooses_a_banned_token_and_is_reproducible_with_a_seed() -> None:
    logits = torch.zeros(200, 4)
    a = Sampler(SamplingParams(temperature=1.0, seed=3), [1, 2], torch.device("cpu")).choose(logits)
    b = Sampler(SamplingParams(temperature=1.0, seed=3), [1, 2], torch.device("cpu")).choose(logits)
    assert torch.equal(a, b) and set(a.tolist()) == {0, 3}
    greedy = Sampler(SamplingParams(), [0], torch.device("cpu")).choose(torch.tensor([[9.0, 1.0, 2.0]]))
    assert greedy.tolist() == [2]
