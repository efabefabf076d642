"""The beat tick: enqueue due probes and scrapes, the healthchecks way (STYLE 9).

1. Pick enabled servers whose next_probe_at (next_scrape_at) is due or NULL, by the indexed column.
2. For each, push the time forward with a conditional UPDATE on the value we read; only the tick
   that changed exactly one row enqueues, so overlapping ticks never double-enqueue.
3. If evaluating a row raises, its time has already been pushed forward (so one bad row cannot
   wedge every tick); the error is re-raised after the other rows are done.
4. Queued runs that waited longer than their interval (the task expired in the queue) become
   `skipped`, so no row stays queued forever.
5. Runs still `running` on a server whose lock is free lost their worker (its renewals stopped and the
   lock expired): each becomes `failed` and its replacement is enqueued (collectors/FAULTS.md). This
   catches what no redelivery will: a task killed by its hard time limit, a message acked before the
   loss, a lost Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import F, Q
from django.utils import timezone

from collectors.locks import is_locked
from collectors.models import ProbeRun, Server
from collectors.probing import queue_run, replace_lost_run

log = logging.getLogger(__name__)

EnqueueProbe = Callable[[Server, ProbeRun], None]
EnqueueScrape = Callable[[Server], None]


def _claim(server: Server, field: str, interval_s: int, now: datetime) -> bool:
    current = getattr(server, field)
    following = now + timedelta(seconds=interval_s)
    changed = Server.objects.filter(pk=server.pk, **{field: current}).update(**{field: following})
    setattr(server, field, following)
    return changed == 1


def _due(field: str, now: datetime) -> list[Server]:
    due = Q(**{f"{field}__lte": now}) | Q(**{f"{field}__isnull": True})
    return list(Server.objects.filter(due, enabled=True).order_by(F(field).asc(nulls_first=True))[:500])


def enqueue_due(
    enqueue_probe: EnqueueProbe, enqueue_scrape: EnqueueScrape, now: datetime | None = None
) -> tuple[int, int]:
    """Returns (probes enqueued, scrapes enqueued)."""
    now = now or timezone.now()
    failure: BaseException | None = None
    probes = scrapes = 0
    for server in _due("next_probe_at", now):
        if not _claim(server, "next_probe_at", server.probe_interval_s, now):
            continue
        try:
            enqueue_probe(server, queue_run(server, ProbeRun.Trigger.SCHEDULED))
            probes += 1
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the other rows
            log.exception("enqueueing a probe of server %s failed", server.pk)
            failure = failure or exc
    for server in _due("next_scrape_at", now):
        if not _claim(server, "next_scrape_at", server.scrape_interval_s, now):
            continue
        try:
            enqueue_scrape(server)
            scrapes += 1
        except Exception as exc:  # noqa: BLE001
            log.exception("enqueueing a scrape of server %s failed", server.pk)
            failure = failure or exc
    expire_stale_runs(now)
    recover_lost_runs(enqueue_probe)
    if failure is not None:
        raise failure
    return probes, scrapes


def expire_stale_runs(now: datetime) -> int:
    """Queued runs older than their server's probe interval (plus a tick's slack) → skipped."""
    stale = 0
    for run in ProbeRun.objects.filter(status=ProbeRun.Status.QUEUED).select_related("server")[:500]:
        if run.queued_at < now - timedelta(seconds=run.server.probe_interval_s + 60):
            stale += ProbeRun.objects.filter(pk=run.pk, status=ProbeRun.Status.QUEUED).update(
                status=ProbeRun.Status.SKIPPED, finished_at=now, error="expired in the queue before a worker took it"
            )
    return stale


def recover_lost_runs(enqueue_probe: EnqueueProbe) -> int:
    """Step 5. A probe holds its server's lock (renewed) from claim to finish, so `running` + free lock =
    its worker is dead. Returns how many replacements were enqueued."""
    enqueued = 0
    for run in ProbeRun.objects.filter(status=ProbeRun.Status.RUNNING).select_related("server", "retry_of")[:500]:
        if is_locked(run.server_id):
            continue
        # Between our read and the lock check, the run may have finished: replace_lost_run's conditional
        # UPDATE (running → failed) then changes nothing and returns None.
        replacement = replace_lost_run(run)
        if replacement is not None:
            enqueue_probe(run.server, replacement)
            enqueued += 1
    return enqueued
