"""Streamed and non-streamed outputs are identical at T = 0, read with a standard SSE parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

PROMPT = "def read_config(path):\n"


def stream_events(http: httpx.Client, path: str, body: dict[str, Any]) -> list[str]:
    with connect_sse(http, "POST", path, json=body) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [event.data for event in source.iter_sse()]


def completion_text(http: httpx.Client, body: dict[str, Any]) -> tuple[str, list[dict]]:
    data = stream_events(http, "/v1/completions", {**body, "stream": True})
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    return "".join(c["choices"][0]["text"] for c in chunks if c["choices"]), chunks


@pytest.mark.parametrize("max_tokens", [1, 7, 120])
def test_it_streams_the_same_completion_text(http: httpx.Client, max_tokens: int) -> None:
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    whole = http.post("/v1/completions", json=body).json()
    streamed, chunks = completion_text(http, body)
    assert streamed == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_it_never_streams_a_stop_string(http: httpx.Client) -> None:
    free = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 60, "temperature": 0}).json()
    text = free["choices"][0]["text"]
    stop = text[len(text) // 2: len(text) // 2 + 3]  # cut the text midway
    assert stop.strip(), f"pick another cut of {text!r}"
    body = {"prompt": PROMPT, "max_tokens": 60, "temperature": 0, "stop": [stop]}
    whole = http.post("/v1/completions", json=body).json()
    streamed, _ = completion_text(http, body)
    assert stop not in whole["choices"][0]["text"]
    assert whole["choices"][0]["finish_reason"] == "stop"
    assert streamed == whole["choices"][0]["text"]


def test_it_streams_the_same_chat_text_with_a_usage_chunk(http: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Sort a list."}], "max_tokens": 40, "temperature": 0}
    whole = http.post("/v1/chat/completions", json=body).json()
    data = stream_events(http, "/v1/chat/completions",
                         {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert streamed == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    # and, as the whole answer does, our spec statistics: the same rounds at T = 0, timed on their own
    spec = chunks[-1]["spec"]
    assert (spec["verify_steps"], spec["tau"]) == (whole["spec"]["verify_steps"], whole["spec"]["tau"])
    assert spec["decode_seconds"] > 0


def test_it_streams_generate_ending_with_full_meta_info(http: httpx.Client) -> None:
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": 30, "temperature": 0, "ignore_eos": True}}
    whole = http.post("/generate", json=body).json()
    data = stream_events(http, "/generate", {**body, "stream": True})
    assert data[-1] == "[DONE]"
    last = json.loads(data[-2])
    assert last["text"] == whole["text"] and last["output_ids"] == whole["output_ids"]
    assert last["meta_info"]["completion_tokens"] == 30
