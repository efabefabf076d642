"""Every call to a misbehaving server ends in a clear error within its bounds (tests/faulty_servers.py)."""

from __future__ import annotations

import time

import pytest

from engine_client import DeadlineExceeded, EngineClient, ProtocolError, ReadTimeout
from tests.faulty_servers import faulty_server

READ_TIMEOUT_S, DEADLINE_S = 1.0, 3.0
# Generous: the bound proves the call ends, not how fast (the machine may be loaded).
ENDS_WITHIN_S = DEADLINE_S + 20


def client(url: str) -> EngineClient:
    return EngineClient(url, dialect="ddtree", read_timeout=READ_TIMEOUT_S, deadline=DEADLINE_S, retries=0)


def call(mode: str, what: str) -> BaseException:
    with faulty_server(mode) as server, client(server.url) as c:
        started = time.monotonic()
        with pytest.raises(Exception) as caught:
            if what == "metrics":
                c.metrics_text()
            else:
                c.complete("hello", max_tokens=4)
        assert time.monotonic() - started < ENDS_WITHIN_S
        return caught.value


def test_it_times_out_a_server_that_hangs_mid_response() -> None:
    err = call("hang", "complete")
    assert isinstance(err, ReadTimeout) and "no data for too long" in str(err)


def test_it_ends_a_server_that_trickles_bytes_at_the_deadline() -> None:
    err = call("slow", "complete")
    assert isinstance(err, DeadlineExceeded), repr(err)
    assert f"within the {DEADLINE_S:g} s deadline" in str(err) and "/v1/completions" in str(err)


def test_it_cuts_a_stalled_read_at_the_deadline_not_the_read_timeout() -> None:
    # A read timeout longer than the deadline: only the watchdog can end the call in time.
    with faulty_server("hang") as server:
        with EngineClient(server.url, dialect="ddtree", read_timeout=600, deadline=DEADLINE_S, retries=0) as c:
            started = time.monotonic()
            with pytest.raises(DeadlineExceeded):
                c.complete("hello", max_tokens=4)
            assert time.monotonic() - started < ENDS_WITHIN_S


def test_it_refuses_garbage_with_a_protocol_error() -> None:
    err = call("garbage", "complete")
    assert isinstance(err, ProtocolError) and "not JSON" in str(err)


def test_it_caps_a_huge_metrics_page() -> None:
    err = call("huge", "metrics")
    assert isinstance(err, ProtocolError) and "body larger than" in str(err), repr(err)


def test_the_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="deadline"):
        EngineClient("http://127.0.0.1:9", deadline=0)
