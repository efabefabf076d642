"""Spectator's own metrics (issue 8): the monitor, monitored. Hooks called from one line each in
probing.py, scraping.py, notify.py and tasks.py; exposed by the dashboard at /metrics.

Processes: gunicorn runs several web workers and Celery several worker processes, each with its own
counters. With PROMETHEUS_MULTIPROC_DIR set in every one of them (docker-compose and `manage.py run` do),
prometheus-client writes each process's values to files there, and /metrics sums every file under
SPECTATOR_METRICS_DIR (default: PROMETHEUS_MULTIPROC_DIR). Containers have PID namespaces of their own, so
each one writes to a subfolder named after its host name (docker-entrypoint.sh) of one shared volume.
Without PROMETHEUS_MULTIPROC_DIR, /metrics shows the web process's own values only. All metrics here are
counters and histograms: they stay right when summed over processes, dead ones included.

Scrape lag is not a counter: it is read from the database when /metrics is asked (`ScrapeLagCollector`),
so it is right whichever process scraped, and it grows when no one scrapes at all.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

log = logging.getLogger(__name__)

_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, float("inf"))

PROBE_RUNS = Counter("spectator_probe_runs", "Probe runs finished, by outcome.", ["outcome"])
PROBE_DURATION = Histogram("spectator_probe_duration_seconds", "Wall time of a probe run (started → finished).",
                           ["outcome"], buckets=_DURATION_BUCKETS)
SCRAPES = Counter("spectator_scrapes", "Scrapes of inference servers' /metrics, by outcome.", ["outcome"])
SCRAPE_DURATION = Histogram("spectator_scrape_duration_seconds", "Time of one scrape (GET /metrics and parse).",
                            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")))
TASK_FAILURES = Counter("spectator_task_failures", "Celery tasks that raised (not counting retries).", ["task"])
TASK_RETRIES = Counter("spectator_task_retries", "Celery task retries scheduled.", ["task"])
EMAILS = Counter("spectator_emails", "Alert and test e-mails: sent, failed (permanent) or deferred (retried).",
                 ["outcome"])


def probe_finished(run: Any) -> None:
    """A probe run reached succeeded / failed / skipped (called by probing._finish)."""
    try:
        PROBE_RUNS.labels(outcome=run.status).inc()
        if run.started_at and run.finished_at:
            PROBE_DURATION.labels(outcome=run.status).observe((run.finished_at - run.started_at).total_seconds())
    except Exception:  # metrics must never fail the work they describe
        log.exception("telemetry: probe_finished")


def scrape_finished(scrape: Any) -> None:
    try:
        SCRAPES.labels(outcome="ok" if scrape.ok else "failed").inc()
        if scrape.duration_s is not None:
            SCRAPE_DURATION.observe(scrape.duration_s)
    except Exception:
        log.exception("telemetry: scrape_finished")


def email_attempt(outcome: str) -> None:
    """`sent`, `failed` (permanent) or `deferred` (transient; the task retries)."""
    EMAILS.labels(outcome=outcome).inc()


def _task_name(sender: Any) -> str:
    return str(getattr(sender, "name", sender))


def _on_task_failure(sender: Any = None, **kwargs: Any) -> None:
    TASK_FAILURES.labels(task=_task_name(sender)).inc()


def _on_task_retry(sender: Any = None, **kwargs: Any) -> None:
    TASK_RETRIES.labels(task=_task_name(sender)).inc()


def connect_celery_signals() -> None:
    """Count task failures and retries in the worker (called once, when collectors.tasks is imported)."""
    from celery import signals

    signals.task_failure.connect(_on_task_failure, weak=False, dispatch_uid="spectator.telemetry.failure")
    signals.task_retry.connect(_on_task_retry, weak=False, dispatch_uid="spectator.telemetry.retry")


class ScrapeLagCollector:
    """spectator_scrape_lag_seconds{server}: seconds since the server's last good scrape, beyond its interval.

    0 while scrapes arrive on time; grows when workers are down, the queue is backed up or the server fails.
    Also spectator_servers{state}: enabled and disabled servers."""

    def collect(self) -> Any:
        from django.db.models import Max, Q
        from django.utils import timezone

        from collectors.models import Server

        now = timezone.now()
        lag = GaugeMetricFamily("spectator_scrape_lag_seconds",
                                "Seconds since the last good scrape beyond the server's scrape interval.",
                                labels=["server"])
        servers = Server.objects.filter(enabled=True).annotate(last=Max("scrapes__at", filter=Q(scrapes__ok=True)))
        for server in servers:
            since = server.last or server.created_at
            behind = (now - since).total_seconds() - server.scrape_interval_s
            lag.add_metric([server.name], max(behind, 0.0))
        yield lag
        counts = GaugeMetricFamily("spectator_servers", "Monitored servers, by state.", labels=["state"])
        enabled = Server.objects.filter(enabled=True).count()
        counts.add_metric(["enabled"], enabled)
        counts.add_metric(["disabled"], Server.objects.count() - enabled)
        yield counts


class ProcessFilesCollector:
    """Every process's counters: the prometheus-client files anywhere under `root` (one folder per container)."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def collect(self) -> Any:
        files = sorted(str(p) for p in self.root.rglob("*.db"))
        return MultiProcessCollector.merge(files, accumulate=True)
