"""Monitored servers that hang mid-response, trickle bytes, send garbage or a 50 MB /metrics: each scrape
and probe ends in bounded time with a clear error on its row, and the same worker then probes the real
engine successfully (tests/faulty_servers.py; bounds: SPECTATOR_HTTP_READ_TIMEOUT / _DEADLINE)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest

from collectors.locks import is_locked
from collectors.models import ProbeRun, Scrape
from collectors.probing import queue_run
from collectors.tasks import enqueue_probe, enqueue_scrape
from tests.collectors.live import SMALL_PLAN
from tests.engine.server.helpers import wait_for
from tests.faulty_servers import MODES, faulty_server

pytestmark = pytest.mark.django_db(transaction=True)

READ_TIMEOUT_S, DEADLINE_S = "2", "5"
SCRAPE_ERRORS = {
    "hang": "ReadTimeout: GET {url}/metrics: no data for too long",
    "slow": f"DeadlineExceeded: GET {{url}}/metrics: no complete answer within the {DEADLINE_S} s deadline",
    "garbage": "ProtocolError: not Prometheus exposition text",
    "huge": "ProtocolError: GET {url}/metrics: body larger than 8388608 bytes",
}
# A probe reads /metrics first (its load guard and τ counters need it): each fault ends the run right there.
PROBE_ERRORS = SCRAPE_ERRORS


def ended(run_id: int) -> ProbeRun | None:
    run = ProbeRun.objects.get(pk=run_id)
    return run if run.status not in ("queued", "running") else None


def test_it_bounds_every_faulty_server_and_the_worker_stays_healthy(
        engine: Any, workers: Any, make_server: Any) -> None:
    worker = workers.start("w1", SPECTATOR_HTTP_READ_TIMEOUT=READ_TIMEOUT_S, SPECTATOR_HTTP_DEADLINE=DEADLINE_S)
    with ExitStack() as stack:
        fakes = {mode: stack.enter_context(faulty_server(mode)) for mode in MODES}
        servers = {mode: make_server(mode, fake.url, kind="ddtree", probe_plan=SMALL_PLAN)
                   for mode, fake in fakes.items()}
        runs = {}
        for mode, server in servers.items():
            enqueue_scrape(server)
            runs[mode] = queue_run(server, ProbeRun.Trigger.MANUAL)
            enqueue_probe(server, runs[mode])

        for mode, server in servers.items():
            url = fakes[mode].url
            run = wait_for(lambda pk=runs[mode].pk: ended(pk), 120, f"the probe of the {mode!r} server to end")
            assert run.status == "failed", (mode, run.status, run.error)
            assert run.error.startswith(PROBE_ERRORS[mode].format(url=url)), (mode, run.error)
            assert run.finished_at and not is_locked(server.pk)
            wait_for(lambda s=server: Scrape.objects.filter(server=s).count() >= 2, 60, f"{mode!r} scrape rows")
            scrapes = list(Scrape.objects.filter(server=server))
            assert all(not s.ok and s.error.startswith(SCRAPE_ERRORS[mode].format(url=url)) for s in scrapes), (
                mode, [s.error for s in scrapes])
            assert all(s.duration_s < 60 for s in scrapes)
    assert worker.poll() is None

    # The same worker, right after: a normal probe of the real engine succeeds.
    healthy = make_server("tiny", engine.url, kind="ddtree", probe_plan=SMALL_PLAN)
    run = queue_run(healthy, ProbeRun.Trigger.MANUAL)
    enqueue_probe(healthy, run)
    done = wait_for(lambda: ended(run.pk), 120, "the probe of the real engine to end")
    assert done.status == "succeeded", (done.error, workers.logs())
    assert done.measurements.filter(kind="two_point").count() == 2
