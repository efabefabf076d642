"""The engine stops mid-probe: a failed run with a clear reason, no stuck lock, and the next
scheduled probe succeeds once the engine is back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from collectors.locks import is_locked
from collectors.models import ProbeRun, Server
from collectors.scheduling import enqueue_due
from collectors.tasks import enqueue_probe, enqueue_scrape
from tests.collectors.live import SMALL_PLAN
from tests.engine.server.helpers import start_server, stop_server, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LONGER_PLAN = {**SMALL_PLAN, "contexts": [64, 256, 1024, 2048], "repeats": 3}


def status(run_id: int) -> ProbeRun:
    return ProbeRun.objects.get(pk=run_id)


def test_it_records_a_failed_run_when_the_engine_stops_mid_probe(workers: Any, make_server: Any) -> None:
    first = start_server()
    server = make_server("tiny", first.url, kind="ddtree", probe_plan=LONGER_PLAN, scrape_interval_s=3600)
    workers.start("w1")
    try:
        enqueue_due(enqueue_probe, enqueue_scrape)
        run_id = ProbeRun.objects.get(server=server).pk
        wait_for(lambda: "two-point" in status(run_id).current_step, 60, "the probe to reach the two-point step")
    finally:
        stop_server(first)

    run = wait_for(lambda: (r := status(run_id)).status in ("failed", "succeeded") and r, 90, "the run to end")
    assert run.status == "failed", workers.logs()
    assert run.error and ("Connect" in run.error or "Protocol" in run.error or "Timeout" in run.error), run.error
    assert run.current_step.startswith("failed during:")
    assert run.finished_at is not None
    # The row is marked failed inside the lock; the lock goes right after.
    wait_for(lambda: not is_locked(server.pk), 10, "the probe lock to be released")

    second = start_server()  # back (on a new port: the row follows it, as an operator would)
    try:
        Server.objects.filter(pk=server.pk).update(
            base_url=second.url, probe_plan=SMALL_PLAN, next_probe_at=timezone.now() - timedelta(seconds=1)
        )
        enqueue_due(enqueue_probe, enqueue_scrape)
        next_run = ProbeRun.objects.filter(server=server, trigger="scheduled").exclude(pk=run_id).latest("pk")
        done = wait_for(lambda: (r := status(next_run.pk)).status in ("failed", "succeeded") and r, 90, "next run")
    finally:
        stop_server(second)
    assert done.status == "succeeded", (done.error, workers.logs())


def test_it_records_an_unreachable_server_as_a_failed_run(workers: Any, make_server: Any) -> None:
    server = make_server("gone", "http://127.0.0.1:9", kind="ddtree", probe_plan=SMALL_PLAN)
    workers.start("w1")
    enqueue_due(enqueue_probe, enqueue_scrape)
    run_id = ProbeRun.objects.get(server=server).pk
    run = wait_for(lambda: (r := status(run_id)).status == "failed" and r, 60, "the run to fail")
    assert "ConnectError" in run.error and "127.0.0.1:9" in run.error
    wait_for(lambda: not is_locked(server.pk), 10, "the probe lock to be released")
    # A transient failure is tried again later as a new run (queued with a backoff countdown).
    wait_for(lambda: ProbeRun.objects.filter(server=server).count() == 2, 30, "the retry's run row")
