from __future__ import annotations

import pytest

from engine.decode import Decoder, RequestError
from engine.sampling import SamplingParams


def test_it_rejects_an_empty_prompt(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="empty"):
        decoder.generate_text("", SamplingParams())
    with pytest.raises(RequestError, match="empty"):
        decoder.generate([], SamplingParams())


def test_it_names_the_context_limit_for_a_long_prompt(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="limit is 1023"):
        decoder.generate([5] * 1024, SamplingParams())


@pytest.mark.parametrize("max_tokens", [0, -3])
def test_it_rejects_max_tokens_below_one(decoder: Decoder, max_tokens: int) -> None:
    with pytest.raises(RequestError, match="at least 1"):
        decoder.generate([1, 5], SamplingParams(max_tokens=max_tokens))


def test_it_rejects_an_unknown_algorithm(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="ar, dflash, ddtree"):
        decoder.generate([1, 5], SamplingParams(), algorithm="medusa")


@pytest.mark.parametrize("budget", [0, -1])
def test_it_rejects_a_budget_below_one(decoder: Decoder, budget: int) -> None:
    with pytest.raises(RequestError, match="at least 1"):
        decoder.generate([1, 5], SamplingParams(), algorithm="ddtree", budget=budget)


@pytest.mark.parametrize(
    "params, message",
    [
        (SamplingParams(temperature=-1), "temperature"),
        (SamplingParams(top_p=0), "top_p"),
        (SamplingParams(top_k=-2), "top_k"),
        (SamplingParams(stop=[""]), "stop"),
    ],
)
def test_it_rejects_bad_sampling_parameters(decoder: Decoder, params: SamplingParams, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        decoder.generate([1, 5], params)


def test_it_rejects_token_ids_outside_the_vocabulary(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="0..4095"):
        decoder.generate([1, 4096], SamplingParams())


def test_it_rejects_a_block_size_the_drafter_was_not_trained_for(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="2..8"):
        Decoder(decoder.target, decoder.drafter, decoder.tokenizer, block_size=9)


@pytest.mark.parametrize(("lookup", "tokens", "message"), [(9, None, "n-gram order in 0..8"), (3, 0, "1..63, got 0"),
                                                           (3, 64, "1..63, got 64")])  # fmt: skip
def test_it_rejects_a_lookup_branch_out_of_range(
    decoder: Decoder, lookup: int, tokens: int | None, message: str
) -> None:
    with pytest.raises(RequestError, match=message):
        Decoder(decoder.target, decoder.drafter, decoder.tokenizer, lookup=lookup, lookup_tokens=tokens)


def test_it_needs_a_drafter_for_speculative_algorithms(decoder: Decoder) -> None:
    with pytest.raises(RequestError, match="needs a drafter"):
        Decoder(decoder.target, None, decoder.tokenizer, algorithm="ddtree")
