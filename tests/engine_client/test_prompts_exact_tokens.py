"""Prompts hit an exact token count on the real engine, through /tokenize and through calibration."""

from __future__ import annotations

import pytest

from engine_client import CANARY_TEXT, CANARY_VERSION, EngineClient, ProbePlan, ProbeReport
from engine_client.probe import ProbeSession
from engine_client.prompts import make_salt


def session(client: EngineClient) -> ProbeSession:
    return ProbeSession(client, ProbePlan(), ProbeReport(url=client.base_url, started_at=0.0))


@pytest.mark.parametrize("n", [64, 257, 1024])
def test_it_builds_prompts_of_exactly_n_tokens_with_the_tokenize_endpoint(client: EngineClient, n: int) -> None:
    builder = session(client).prompt_builder()
    assert builder.tokenizer_backed
    p = builder.build(n)
    assert p.exact and p.tokens == n
    assert client.complete(p.text, max_tokens=1).prompt_tokens == n  # the completions endpoint agrees


def test_it_calibrates_on_usage_prompt_tokens_when_the_server_cannot_tokenize(client: EngineClient) -> None:
    client._has_tokenize = False  # as a server without /tokenize
    s = session(client)
    builder = s.prompt_builder()
    assert not builder.tokenizer_backed
    for n in (100, 300):
        p = builder.build(n)
        assert p.exact and client.complete(p.text, max_tokens=1).prompt_tokens == n
    assert s.report.requests_sent == builder.calls  # calibration went through the probe's own requests


def test_it_starts_every_prompt_with_a_unique_salt_of_one_token_length(client: EngineClient) -> None:
    builder = session(client).prompt_builder()
    prompts = [builder.build(128) for _ in range(6)]
    assert len({p.salt for p in prompts}) == 6 and all(p.text.startswith(p.salt) for p in prompts)
    lengths = {len(client.tokenize(p.salt) or []) for p in prompts}
    assert len(lengths) == 1
    assert all(CANARY_TEXT[:200] in p.text for p in prompts)


def test_it_versions_an_original_canary_of_several_kilobytes() -> None:
    assert CANARY_VERSION and len(CANARY_TEXT) > 3000
    assert "def " in CANARY_TEXT and "class " in CANARY_TEXT  # code as well as prose
    assert make_salt() != make_salt()
