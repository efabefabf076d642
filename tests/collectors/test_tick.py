from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from collectors.models import ProbeRun, Server
from collectors.scheduling import enqueue_due

pytestmark = pytest.mark.django_db


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.probes: list[tuple[int, int]] = []
        self.scrapes: list[int] = []
        self.fail_on = fail_on

    def probe(self, server: Server, run: ProbeRun) -> None:
        if server.name == self.fail_on:
            raise RuntimeError("broker down")
        self.probes.append((server.pk, run.pk))

    def scrape(self, server: Server) -> None:
        self.scrapes.append(server.pk)


def test_it_enqueues_due_rows_only_and_pushes_their_times(make_server: Any) -> None:
    now = timezone.now()
    due = make_server("due", next_probe_at=now - timedelta(seconds=1), next_scrape_at=now)
    new = make_server("new")  # NULL times: due at the first tick
    later = make_server("later", next_probe_at=now + timedelta(hours=1), next_scrape_at=now + timedelta(hours=1))
    make_server("off", enabled=False)
    rec = Recorder()

    assert enqueue_due(rec.probe, rec.scrape, now=now) == (2, 2)

    assert {pk for pk, _ in rec.probes} == {due.pk, new.pk}
    assert set(rec.scrapes) == {due.pk, new.pk}
    due.refresh_from_db()
    assert due.next_probe_at == now + timedelta(seconds=due.probe_interval_s)
    assert due.next_scrape_at == now + timedelta(seconds=due.scrape_interval_s)
    assert ProbeRun.objects.filter(server=later).count() == 0
    run = ProbeRun.objects.get(pk=rec.probes[0][1])
    assert (run.status, run.trigger) == ("queued", "scheduled")


def test_it_enqueues_nothing_twice_within_one_interval(make_server: Any) -> None:
    make_server()
    rec = Recorder()
    now = timezone.now()
    enqueue_due(rec.probe, rec.scrape, now=now)
    assert enqueue_due(rec.probe, rec.scrape, now=now + timedelta(seconds=1)) == (0, 0)
    assert len(rec.probes) == 1


def test_it_pushes_a_failing_row_forward_then_reraises(make_server: Any) -> None:
    now = timezone.now()
    bad = make_server("bad")
    good = make_server("good")
    rec = Recorder(fail_on="bad")

    with pytest.raises(RuntimeError, match="broker down"):
        enqueue_due(rec.probe, rec.scrape, now=now)

    bad.refresh_from_db()
    assert bad.next_probe_at == now + timedelta(seconds=bad.probe_interval_s)
    assert [pk for pk, _ in rec.probes] == [good.pk]  # the other rows were still handled
    assert set(rec.scrapes) == {bad.pk, good.pk}


def test_it_skips_runs_that_expired_in_the_queue(make_server: Any) -> None:
    server = make_server(next_probe_at=timezone.now() + timedelta(hours=1))
    stale = ProbeRun.objects.create(server=server, trigger="scheduled")
    ProbeRun.objects.filter(pk=stale.pk).update(queued_at=timezone.now() - timedelta(hours=3))
    fresh = ProbeRun.objects.create(server=server, trigger="manual")
    rec = Recorder()
    enqueue_due(rec.probe, rec.scrape)
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == "skipped" and "expired" in stale.error
    assert fresh.status == "queued"
