"""The exception tree, status errors with status_code/body/request_id, protocol errors, and the API key's secrecy."""

from __future__ import annotations

import logging

import httpx
import pytest

from engine_client import (
    ConnectError,
    ConnectTimeout,
    EngineClient,
    EngineClientError,
    ProtocolError,
    ReadTimeout,
    StatusError,
    TimeoutError,
)

SECRET = "sk-test-very-secret-key"


def test_it_arranges_errors_in_one_tree() -> None:
    for cls in (ConnectError, TimeoutError, StatusError, ProtocolError):
        assert issubclass(cls, EngineClientError)
    assert issubclass(ConnectTimeout, ConnectError) and issubclass(ConnectTimeout, TimeoutError)
    assert issubclass(ReadTimeout, TimeoutError) and not issubclass(ReadTimeout, ConnectError)


def test_it_raises_status_errors_with_code_body_and_request_id(mock_client) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "prompt too long (max 4096)"}},
                              headers={"x-request-id": "req-42"})

    with pytest.raises(StatusError) as e:
        mock_client(handler).complete("x", max_tokens=1)
    assert e.value.status_code == 400 and e.value.request_id == "req-42"
    assert "max 4096" in e.value.body and "max 4096" in str(e.value)


@pytest.mark.parametrize("body", [b"<html>gateway</html>", b'{"no": "choices"}', b"[1, 2]"])
def test_it_raises_protocol_error_on_unusable_answers(mock_client, body: bytes) -> None:
    with pytest.raises(ProtocolError):
        mock_client(lambda r: httpx.Response(200, content=body)).complete("x", max_tokens=1)


def test_it_refuses_an_oversize_metrics_body(mock_client) -> None:
    c = mock_client(lambda r: httpx.Response(200, content=b"# junk\n" * 100_000))
    with pytest.raises(ProtocolError, match="larger than"):
        c.metrics_text(max_bytes=10_000)


def test_it_sends_the_api_key_as_a_bearer_token_and_never_shows_it(mock_client, caplog) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(503, json={"error": {"message": "overloaded"}})

    caplog.set_level(logging.DEBUG)
    c = mock_client(handler, api_key=SECRET, retries=1)
    with pytest.raises(StatusError) as e:
        c.complete("x", max_tokens=1)
    assert seen == [f"Bearer {SECRET}"] * 2
    for text in (repr(c), str(c), str(e.value), repr(e.value), e.value.body, caplog.text):
        assert SECRET not in text


def test_it_reports_an_unreachable_server_as_connect_error() -> None:
    with EngineClient("http://127.0.0.1:9", retries=0, connect_timeout=2) as c, pytest.raises(ConnectError) as e:
        c.metrics_text()
    assert "127.0.0.1:9" in str(e.value)


@pytest.mark.parametrize("url", ["not a url", "ftp://x", "http://"])
def test_it_rejects_bad_urls_and_dialects(url: str) -> None:
    with pytest.raises(ValueError):
        EngineClient(url)
    with pytest.raises(ValueError):
        EngineClient("http://x", dialect="tgi")
