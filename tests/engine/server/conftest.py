"""A real server on loopback: `python -m engine serve` with the tiny models on CPU, as a subprocess.

The session server starts with a short load delay, and the fixture records every /health answer
while it waits, so the readiness test can check the 503-then-200 sequence without a second server.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.engine.server.helpers import Server, start_server, stop_server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = start_server("--load-delay", "0.5")
    yield s
    stop_server(s)


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c
