"""SIGKILL of the worker process running a probe (what the OOM killer does): the run is not lost and
not duplicated. Contract (collectors/FAULTS.md): the killed run ends `failed` with "worker lost", exactly
one replacement run (`retry_of`) runs once the server's lock has expired, and it succeeds."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from collectors.locks import is_locked
from collectors.models import ProbeRun
from collectors.probing import WORKER_LOST, queue_run
from collectors.tasks import enqueue_probe
from tests.collectors.live import SMALL_PLAN
from tests.engine.server.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LONGER_PLAN = {**SMALL_PLAN, "contexts": [64, 256, 1024], "repeats": 2}
LOCK_TTL_S = "6"  # renewed every 2 s while the probe runs; gone 6 s after the worker died


def pool_child(worker_pid: int) -> int:
    children = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    assert len(children) == 1, f"expected one pool process under the worker, found {children}"
    return int(children[0])


def test_it_fails_the_killed_run_and_runs_one_replacement(engine: Any, workers: Any, make_server: Any) -> None:
    server = make_server("tiny", engine.url, kind="ddtree", probe_plan=LONGER_PLAN, scrape_interval_s=3600)
    worker = workers.start("w1", SPECTATOR_PROBE_LOCK_TTL=LOCK_TTL_S)
    killed = queue_run(server, ProbeRun.Trigger.MANUAL)
    enqueue_probe(server, killed)
    wait_for(lambda: "two-point" in ProbeRun.objects.get(pk=killed.pk).current_step, 90, "the probe to be measuring")
    assert is_locked(server.pk)

    os.kill(pool_child(worker.pid), signal.SIGKILL)

    def settled() -> ProbeRun | None:
        run = ProbeRun.objects.get(pk=killed.pk)
        replacement = ProbeRun.objects.filter(retry_of=run).first()
        return replacement if replacement and replacement.status in ("succeeded", "failed") else None

    replacement = wait_for(settled, 180, "the replacement run to finish")
    killed.refresh_from_db()
    assert killed.status == "failed" and killed.error.startswith(WORKER_LOST), (killed.status, killed.error)
    assert killed.current_step.startswith("failed during: two-point") and killed.finished_at
    assert replacement.status == "succeeded", (replacement.error, workers.logs())
    assert replacement.trigger == "manual" and replacement.started_at >= killed.finished_at
    # No duplicate, nothing left behind: two rows for the one request, none queued or running, the lock free.
    assert ProbeRun.objects.filter(server=server).count() == 2
    wait_for(lambda: not is_locked(server.pk), 10, "the probe lock to be released")  # released after the row
    assert worker.poll() is None, "the worker itself survives the loss of its pool process"
