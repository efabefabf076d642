"""The official `openai` Python client completes, chats and streams against the server."""

from __future__ import annotations

import openai
import pytest

from tests.engine.server.helpers import Server

PROMPT = "def parse(line):\n"


@pytest.fixture
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def test_it_completes_with_usage(client: openai.OpenAI) -> None:
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24, temperature=0)
    assert r.choices[0].text
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage is not None and r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    spec = r.model_extra["spec"]
    assert spec["verify_steps"] >= 1 and spec["tau"] >= 1.0 and spec["decode_seconds"] > 0


def test_it_streams_completions_ending_with_a_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")


def test_it_chats_and_streams_chat(client: openai.OpenAI) -> None:
    messages = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "A parser, please."}]
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.usage is not None and 0 < r.usage.completion_tokens <= 16
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0,
                                            stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed == r.choices[0].message.content


def test_it_raises_not_found_for_an_unknown_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="not found"):
        client.completions.create(model="gpt-none", prompt=PROMPT, max_tokens=4)


def test_it_lists_the_served_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["tiny"]
