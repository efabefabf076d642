"""Retries only for transient failures (connect errors, timeouts, 408/429/5xx), never for other 4xx."""

from __future__ import annotations

import httpx
import pytest

from engine_client import ConnectError, EngineClientError, ReadTimeout, StatusError

OK = {"choices": [{"text": "hi", "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def flaky(*failures: object):
    """A handler that fails with each of `failures` in turn (a status code or an exception), then answers OK."""
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= len(failures):
            f = failures[len(calls) - 1]
            if isinstance(f, Exception):
                raise f
            return httpx.Response(f, json={"error": {"message": "busy"}}, headers={"retry-after": "0"})
        return httpx.Response(200, json=OK)

    return handler, calls


@pytest.mark.parametrize("failure", [503, 500, 429, 502])
def test_it_retries_transient_statuses_then_succeeds(mock_client, failure: int) -> None:
    handler, calls = flaky(failure, failure)
    c = mock_client(handler, retries=2)
    assert c.complete("x", max_tokens=1).text == "hi"
    assert len(calls) == 3


def test_it_retries_connect_errors_and_read_timeouts(mock_client) -> None:
    handler, calls = flaky(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"))
    assert mock_client(handler, retries=2).complete("x", max_tokens=1).text == "hi"
    assert len(calls) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_it_never_retries_other_4xx(mock_client, status: int) -> None:
    handler, calls = flaky(status, status, status)
    with pytest.raises(StatusError) as e:
        mock_client(handler, retries=3).complete("x", max_tokens=1)
    assert len(calls) == 1 and e.value.status_code == status


def test_it_gives_up_after_the_configured_retries_with_the_last_error(mock_client) -> None:
    handler, calls = flaky(*[httpx.ConnectError("refused")] * 5)
    with pytest.raises(ConnectError):
        mock_client(handler, retries=2).complete("x", max_tokens=1)
    assert len(calls) == 3


def test_it_maps_a_read_timeout_to_read_timeout_in_the_tree(mock_client) -> None:
    handler, _ = flaky(*[httpx.ReadTimeout("slow")] * 3)
    with pytest.raises(ReadTimeout) as e:
        mock_client(handler, retries=0).complete("x", max_tokens=1)
    assert isinstance(e.value, EngineClientError) and isinstance(e.value, TimeoutError)


def test_it_caps_the_exponential_backoff(mock_client) -> None:
    c = mock_client(lambda r: httpx.Response(200), backoff_base=1.0, backoff_cap=4.0)
    delays = [c._backoff(attempt, None) for attempt in range(10)]
    assert max(delays) <= 4.0 and delays[0] <= 1.0


def test_it_never_retries_a_stream_whose_body_had_started(mock_client) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        body = b'data: {"choices": [{"text": "a"}]}\n\ndata: {"error": {"message": "boom", "code": 503}}\n\n'
        return httpx.Response(200, content=body)

    with pytest.raises(StatusError):
        mock_client(handler, retries=3).complete("x", max_tokens=4, stream=True)
    assert len(calls) == 1
