"""Two workers, one server: probes never overlap (from the stored start and end times)."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.models import ProbeRun
from collectors.probing import queue_run
from collectors.tasks import enqueue_probe
from tests.collectors.live import SMALL_PLAN
from tests.engine.server.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def all_final(ids: list[int]) -> bool:
    return not ProbeRun.objects.filter(pk__in=ids, status__in=("queued", "running")).exists()


def test_it_never_runs_two_probes_on_one_server_at_once(engine: Any, workers: Any, make_server: Any) -> None:
    server = make_server("tiny", engine.url, kind="ddtree", probe_plan=SMALL_PLAN)
    workers.start("w1")
    workers.start("w2")
    ids: list[int] = []
    for _ in range(2):  # two rounds of three simultaneous requests
        batch = [queue_run(server, ProbeRun.Trigger.MANUAL) for _ in range(3)]
        for run in batch:
            enqueue_probe(server, run)
        ids += [run.pk for run in batch]
        wait_for(lambda ids=tuple(ids): all_final(list(ids)), 120, "every probe run to end")

    runs = list(ProbeRun.objects.filter(pk__in=ids))
    ran = sorted((r for r in runs if r.status != "skipped"), key=lambda r: r.started_at)
    assert len(ran) >= 2 and all(r.status == "succeeded" for r in ran), [(r.status, r.error) for r in runs]
    for earlier, later in zip(ran, ran[1:], strict=False):
        assert earlier.finished_at <= later.started_at, "two probes overlapped"
    skipped = [r for r in runs if r.status == "skipped"]
    assert all(r.error == "another probe is running on this server" for r in skipped)
