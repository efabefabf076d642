"""The streaming check blames a buffered stream on the transport, not on the server."""

from __future__ import annotations

import json

import httpx

from engine_client import ProbePlan, ProbeReport
from engine_client.probe import ProbeSession, stream_check
from engine_client.prompts import PromptBuilder


def buffering_proxy(request: httpx.Request, stream_spec: dict | None = None) -> httpx.Response:
    """A server behind a proxy that holds the whole SSE body and delivers it at once (its last chunk with
    `stream_spec`, if given, as our engine's has)."""
    body = json.loads(request.content)
    n = body["max_tokens"]
    if not body.get("stream"):
        return httpx.Response(200, json={
            "choices": [{"text": "x" * n, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": n},
            "spec": {"verify_steps": n // 2, "tau": 2.0, "drafted_tokens": n * 8, "accepted_tokens": n // 2,
                     "decode_seconds": n / 100}})
    events = [{"choices": [{"text": "xx", "finish_reason": None}]} for _ in range(n // 2)]
    events.append({"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": n},
                   **({"spec": stream_spec} if stream_spec else {})})
    data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, content=data.encode())


def test_it_flags_a_stream_that_arrives_all_at_once_as_a_transport_artefact(mock_client) -> None:
    client = mock_client(buffering_proxy, dialect="openai")
    report = ProbeReport(url=client.base_url, started_at=0.0)
    session = ProbeSession(client, ProbePlan(), report)
    builder = PromptBuilder(lambda text: len(text.split()), tokenizer_backed=False)
    m, verdict = stream_check(session, builder, 64, 40, two_point_tps=100.0)
    assert verdict["transport_artefact"] is True
    assert verdict["reference"] == "server_decode" and verdict["server_tps"] == (40 - 1) / 0.4
    assert m.kind == "stream" and m.tokens_per_chunk == 2


def test_it_compares_with_the_streamed_requests_own_decode_time_when_the_stream_reports_it(mock_client) -> None:
    spec = {"verify_steps": 20, "tau": 2.0, "drafted_tokens": 320, "accepted_tokens": 20, "decode_seconds": 0.78}
    client = mock_client(lambda request: buffering_proxy(request, spec), dialect="openai")
    session = ProbeSession(client, ProbePlan(), ProbeReport(url=client.base_url, started_at=0.0))
    builder = PromptBuilder(lambda text: len(text.split()), tokenizer_backed=False)
    _, verdict = stream_check(session, builder, 64, 40, two_point_tps=100.0)
    # the stream's own server time (39 tokens in 0.78 s), not the non-streamed twin's (0.4 s)
    assert verdict["reference"] == "stream_server_decode" and verdict["server_tps"] == (40 - 1) / 0.78
    assert verdict["transport_artefact"] is True  # still all at once
