"""Shared fixtures: the real bundled engine (tiny, CPU) on loopback, a client for it, fixture texts, and a
mock-transport factory for unit tests that need no network."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from engine_client import EngineClient, ProbePlan, ProbeReport, run_probe
from tests.engine.server.helpers import Server, start_server, stop_server

FIXTURES = Path(__file__).parent / "fixtures"
# Small enough for 2 CPU cores, long enough that t2 − t1 dwarfs scheduling noise (~0.3 s at ~400 tok/s);
# three repeats, so one pair disturbed by a neighbour process cannot move the median.
SMALL_PLAN = ProbePlan(contexts=(64, 256), outputs=(96,), n1=32, n2=160, repeats=3, warmup_tokens=8)


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture(scope="session")
def engine() -> Iterator[Server]:
    # start_server runs the subprocess with OMP_NUM_THREADS=1 (2-core machine shared with other suites).
    s = start_server()
    yield s
    stop_server(s)


@pytest.fixture
def client(engine: Server) -> Iterator[EngineClient]:
    with EngineClient(engine.url, read_timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def probe_report(engine: Server) -> ProbeReport:
    """One probe of the idle engine, shared by the tests that only read its report."""
    with EngineClient(engine.url, read_timeout=60) as c:
        return run_probe(c, SMALL_PLAN)


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def mock_client() -> Iterator[Callable[..., EngineClient]]:
    """mock_client(handler, **kwargs): an EngineClient over httpx.MockTransport, with no backoff delay."""
    made: list[EngineClient] = []

    def make(handler: Handler, **kwargs: object) -> EngineClient:
        kwargs.setdefault("backoff_base", 0.0)
        c = EngineClient("http://engine.test", transport=httpx.MockTransport(handler), **kwargs)  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
