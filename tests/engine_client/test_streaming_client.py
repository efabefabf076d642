"""Streamed completions: every SSE chunk is timed and, where the server says, carries its token count."""

from __future__ import annotations

import json

import httpx
import pytest

from engine_client import ProtocolError, StatusError


def sse(*objs: object) -> bytes:
    return b"".join(f"data: {o if isinstance(o, str) else json.dumps(o)}\n\n".encode() for o in objs)


def chunk(text: str, completion_tokens: int | None = None, finish: str | None = None) -> dict:
    c = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if completion_tokens is not None:
        c["usage"] = {"prompt_tokens": 5, "completion_tokens": completion_tokens}
    return c


def test_it_records_each_chunk_with_its_token_count_from_continuous_usage(mock_client) -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=sse(chunk("ab", 2), chunk("cde", 5), chunk("", 5, "length"), "[DONE]"),
                              headers={"content-type": "text/event-stream"})

    c = mock_client(handler).complete("x", max_tokens=5, stream=True)
    assert seen[0]["stream"] is True and seen[0]["stream_options"]["include_usage"] is True
    assert seen[0]["temperature"] == 0.0 and seen[0]["ignore_eos"] is True and seen[0]["seed"] == 0
    assert c.stream and c.text == "abcde" and c.finish_reason == "length"
    assert [ch.tokens for ch in c.chunks if ch.text] == [2, 3]
    assert c.completion_tokens == 5 and c.prompt_tokens == 5
    assert c.first_token_s is not None and 0 <= c.first_token_s <= c.end_s
    assert all(0 <= ch.t_s <= c.end_s for ch in c.chunks)


def test_it_leaves_token_counts_unknown_when_chunks_carry_only_text(mock_client) -> None:
    body = sse(chunk("ab"), chunk("cd"), chunk("", finish="length"),
               {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}, "[DONE]")
    c = mock_client(lambda r: httpx.Response(200, content=body)).complete("x", max_tokens=4, stream=True)
    assert [ch.tokens for ch in c.chunks if ch.text] == [None, None]
    assert c.completion_tokens == 4


def test_it_raises_on_an_in_band_stream_error_and_on_garbage_events(mock_client) -> None:
    err = sse(chunk("a"), {"error": {"message": "model loop died", "code": 500}}, "[DONE]")
    with pytest.raises(StatusError, match="model loop died"):
        mock_client(lambda r: httpx.Response(200, content=err), retries=0).complete("x", max_tokens=4, stream=True)
    with pytest.raises(ProtocolError):
        mock_client(lambda r: httpx.Response(200, content=b"data: {oops\n\n")).complete("x", max_tokens=4, stream=True)


def test_it_times_non_streamed_answers_and_parses_spec_fields(mock_client) -> None:
    body = {"id": "cmpl-1", "choices": [{"text": "hello", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2},
            "spec": {"verify_steps": 1, "tau": 2.0, "drafted_tokens": 32, "accepted_tokens": 1, "decode_seconds": 0.01}}
    c = mock_client(lambda r: httpx.Response(200, json=body)).complete("x", max_tokens=2)
    assert c.text == "hello" and c.request_id == "cmpl-1" and c.completion_tokens == 2
    assert c.spec is not None and c.spec.tau == 2.0 and c.e2e_s >= (c.first_byte_s or 0) >= 0
