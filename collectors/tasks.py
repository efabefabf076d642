"""Celery tasks, thin (STYLE 8): ids in, a plain function does the work, the task owns retries.

`shared_task`, so collectors never imports the dashboard project; its Celery app autodiscovers these.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from collectors import telemetry
from collectors.models import ProbeRun, Server

log = logging.getLogger(__name__)
telemetry.connect_celery_signals()  # task failures and retries on the dashboard's /metrics

PROBE_MAX_RETRIES = 2
# A redelivered run still `running` behind a held lock is looked at again when the lock would expire;
# bounded, because the beat's sweep (scheduling.recover_lost_runs) settles such runs anyway.
BUSY_MAX_RETRIES = 20
DB_MAX_RETRIES = 8


def _backoff_s(retries: int) -> int:
    # Capped exponential backoff: 30 s, 60 s, 120 s … at most 10 minutes.
    return min(30 * 2**retries, 600)


def _db_backoff_s(retries: int) -> int:
    # The database restarting or failing over: 2, 4, 8 … s, at most a minute.
    return min(2 * 2**retries, 60)


def _db_down(exc: BaseException) -> bool:
    from django.db import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError)


def enqueue_probe(server: Server, run: ProbeRun) -> Any:
    """Queue the probe task for `run`; Celery's AsyncResult (tests wait on its id in the worker's log)."""
    # A probe still waiting after its interval is stale: the next scheduled one replaces it.
    return probe.apply_async((server.pk, run.trigger, run.pk), expires=server.probe_interval_s)


def enqueue_scrape(server: Server) -> None:
    scrape.apply_async((server.pk,), expires=server.scrape_interval_s)


@shared_task(name="collectors.tasks.tick", ignore_result=True, soft_time_limit=60, time_limit=90)
def tick() -> None:
    from collectors.scheduling import enqueue_due

    probes, scrapes = enqueue_due(enqueue_probe, enqueue_scrape)
    if probes or scrapes:
        log.info("tick: enqueued %d probe(s), %d scrape(s)", probes, scrapes)


@shared_task(
    bind=True,
    name="collectors.tasks.probe",
    ignore_result=True,
    soft_time_limit=settings.SPECTATOR_PROBE_TIME_LIMIT,
    time_limit=settings.SPECTATOR_PROBE_TIME_LIMIT + 60,
    max_retries=PROBE_MAX_RETRIES,
)
def probe(self, server_id: int, trigger: str = ProbeRun.Trigger.MANUAL, run_id: int | None = None) -> None:  # type: ignore[no-untyped-def]
    from collectors.probing import ProbeFailed, ServerBusy, run_probe_for_server

    try:
        run_probe_for_server(server_id, trigger, run_id)
    except (Server.DoesNotExist, ProbeRun.DoesNotExist):
        log.info("probe: server %s or run %s no longer exists", server_id, run_id)
    except ServerBusy as busy:
        # Redelivered after its worker died, whose lock has not expired yet (or a live worker still runs it):
        # look again once the lock would have expired; the run is then settled (FAULTS.md).
        raise self.retry(countdown=busy.retry_in_s + 1, max_retries=BUSY_MAX_RETRIES) from None
    except ProbeFailed as failed:
        # The failed run is stored with its reason. A transient failure (unreachable, timeout, 5xx)
        # is tried again later as a new run, so that every attempt keeps its own row.
        if failed.transient and self.request.retries < PROBE_MAX_RETRIES:
            # A confirmation keeps its suspect run: the link moves to the retry (it is one-to-one).
            confirms_id = failed.run.confirms_id
            if confirms_id:
                ProbeRun.objects.filter(pk=failed.run.pk).update(confirms=None)
            retry_run = ProbeRun.objects.create(
                server_id=server_id, trigger=trigger, requested_by_id=failed.run.requested_by_id, plan=failed.run.plan,
                confirms_id=confirms_id, retry_of=failed.run,
            )
            countdown = _backoff_s(self.request.retries)
            raise self.retry(args=(server_id, trigger, retry_run.pk), countdown=countdown) from None
    except Exception as exc:
        if not _db_down(exc) or self.request.retries >= DB_MAX_RETRIES:
            raise
        # The database went away mid-task: the same message again, once it is back. A run left `running`
        # is then found behind a free lock and replaced (probing.replace_lost_run): nothing is lost.
        log.warning("probe of server %s: database unavailable (%s); retrying", server_id, exc)
        raise self.retry(countdown=_db_backoff_s(self.request.retries), max_retries=DB_MAX_RETRIES) from None


@shared_task(
    bind=True,
    name="collectors.tasks.scrape",
    ignore_result=True,
    soft_time_limit=settings.SPECTATOR_SCRAPE_TIME_LIMIT,
    time_limit=settings.SPECTATOR_SCRAPE_TIME_LIMIT + 30,
    max_retries=DB_MAX_RETRIES,
)
def scrape(self, server_id: int) -> None:  # type: ignore[no-untyped-def]
    # No retry for the server's failures: a failed scrape leaves its row, and the next one is only
    # scrape_interval_s away. Only our own database being down is retried (the row could not be written).
    from collectors.scraping import scrape_server

    try:
        server = Server.objects.get(pk=server_id)
        done = scrape_server(server)
    except Server.DoesNotExist:
        return
    except Exception as exc:
        if not _db_down(exc) or self.request.retries >= DB_MAX_RETRIES:
            raise
        log.warning("scrape of server %s: database unavailable (%s); retrying", server_id, exc)
        raise self.retry(countdown=_db_backoff_s(self.request.retries)) from None
    from collectors.alerts_metrics import after_scrape

    try:
        after_scrape(done)  # τ from the window (collectors/alerts_metrics.py)
    except Exception:  # detection must never cost the scrape, which is already stored
        log.exception("detection after scrape %s failed", done.pk)


@shared_task(name="collectors.tasks.retention", ignore_result=True, soft_time_limit=1800, time_limit=1900)
def retention() -> None:
    from collectors.retention import apply_retention

    log.info("retention: deleted %s", apply_retention())


NOTIFY_MAX_RETRIES = 6


def _notify_backoff_s(retries: int) -> int:
    # 1, 2, 4 … minutes, at most 30: an SMTP server back within the hour still gets the mail.
    return min(60 * 2**retries, 1800)


@shared_task(bind=True, name="collectors.tasks.send_notification", ignore_result=True, soft_time_limit=60,
             time_limit=90, max_retries=NOTIFY_MAX_RETRIES)
def send_notification_task(self, notification_id: int) -> None:  # type: ignore[no-untyped-def]
    from collectors.notify import TransientSendError, give_up, retry_at, send_notification

    try:
        send_notification(notification_id)
    except TransientSendError:
        if self.request.retries >= NOTIFY_MAX_RETRIES:
            give_up(notification_id)
            return
        countdown = _notify_backoff_s(self.request.retries)
        retry_at(notification_id, countdown)
        raise self.retry(countdown=countdown) from None


@shared_task(name="collectors.tasks.sweep_notifications", ignore_result=True, soft_time_limit=60, time_limit=90)
def sweep_notifications() -> None:
    """Beat: re-queue notifications whose send task was lost (collectors/notify.py `sweep_stuck`)."""
    from collectors.notify import sweep_stuck

    # Longer than the send task's hard limit (90 s), so a send still in progress is never taken.
    stuck_s = max(settings.SPECTATOR_NOTIFY_STUCK_SECONDS, 120)
    ids = sweep_stuck(stuck_s=stuck_s, max_attempts=NOTIFY_MAX_RETRIES + 1)
    if ids:
        log.warning("sweep: re-queued %d stuck notification(s)", len(ids))


@shared_task(name="collectors.tasks.rollup_scrapes", ignore_result=True, soft_time_limit=600, time_limit=660)
def rollup_scrapes() -> None:
    from collectors.rollups import roll_up

    rows = roll_up()
    log.info("rollup: %d hourly row(s) written", rows)
