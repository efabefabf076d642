"""The dashboard's own /metrics (issue 8): counters moved by real work in real worker processes, summed
over processes and over per-container folders (prometheus-client multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.collectors.live import SMALL_PLAN
from tests.collectors.smtp_inbox import Inbox, smtp_inbox
from tests.engine.server.helpers import ROOT, wait_for


def scrape_metrics(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics")
    assert r.status_code == 200, r.content
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.content.decode()) for s in family.samples}


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def staff_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def smtp() -> Iterator[Inbox]:
    with smtp_inbox() as inbox:
        yield inbox


def _count_in_a_process(folder: Path, emails: int) -> None:
    code = ("from collectors import telemetry\n"
            f"for _ in range({emails}): telemetry.email_attempt('sent')\n"
            "telemetry.SCRAPE_DURATION.observe(0.2)\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)


@pytest.mark.django_db
def test_it_sums_the_counters_of_every_process_and_container(staff_client: Client, tmp_path: Path,
                                                              settings: Any) -> None:
    # Two processes sharing one folder (gunicorn or Celery workers of one container), and a third in a
    # folder of its own (another container on the shared volume).
    for folder, emails in ((tmp_path / "web-1", 2), (tmp_path / "web-1", 3), (tmp_path / "worker-1", 4)):
        folder.mkdir(exist_ok=True)
        _count_in_a_process(folder, emails)
    assert len(list((tmp_path / "web-1").glob("*.db"))) >= 2  # one file per process
    settings.SPECTATOR_METRICS_DIR = str(tmp_path)
    samples = scrape_metrics(staff_client)
    assert value(samples, "spectator_emails_total", outcome="sent") == 9
    assert value(samples, "spectator_scrape_duration_seconds_count") == 3


def test_it_counts_real_probes_scrapes_emails_and_task_failures_from_the_workers(
    workers: Any, engine: Any, make_server: Any, alice: Any, smtp: Inbox, tmp_path: Path, settings: Any,
    monkeypatch: Any,
) -> None:
    from collectors.models import Notification, ProbeRun, Server
    from collectors.probing import queue_run
    from collectors.tasks import enqueue_probe, enqueue_scrape
    from dashboard.celery import app
    from tests.collectors.notify_helpers import opened_alert

    folder = tmp_path / "metrics"
    folder.mkdir()
    for name, val in {"PROMETHEUS_MULTIPROC_DIR": str(folder), "EMAIL_HOST": "127.0.0.1",
                      "EMAIL_PORT": str(smtp.port), "EMAIL_USE_TLS": "false",
                      "DEFAULT_FROM_EMAIL": "spectator@example.org"}.items():
        monkeypatch.setenv(name, val)  # for the worker processes only: this one's settings are loaded
    workers.start("metrics")
    settings.SPECTATOR_METRICS_DIR = str(folder)
    client = Client()
    client.force_login(alice)
    before = scrape_metrics(client)
    assert value(before, "spectator_probe_runs_total", outcome="succeeded") == 0

    server = make_server("engine", engine.url, kind="ddtree", probe_plan=SMALL_PLAN)
    gone = make_server("gone", "http://127.0.0.1:9", kind="ddtree")
    run = queue_run(server, ProbeRun.Trigger.MANUAL)
    enqueue_probe(server, run)
    enqueue_scrape(gone)
    app.send_task("collectors.tasks.scrape", args=["not-a-server-id"])  # raises in the worker: a task failure
    _, [note] = opened_alert(server, emails=["ops@example.org"])  # its mail is sent by a worker, over SMTP

    def finished() -> bool:
        run.refresh_from_db()
        note.refresh_from_db()
        return run.status in ("succeeded", "failed") and note.state == Notification.State.SENT

    wait_for(finished, 180, "the probe and the e-mail to finish")
    assert run.status == "succeeded", run.error

    def counted() -> dict[Any, float]:
        samples = scrape_metrics(client)
        return samples if value(samples, "spectator_task_failures_total", task="collectors.tasks.scrape") else {}

    after = wait_for(counted, 60, "the task failure to be counted")
    assert value(after, "spectator_probe_runs_total", outcome="succeeded") == 1
    assert value(after, "spectator_probe_duration_seconds_count", outcome="succeeded") == 1
    assert value(after, "spectator_probe_duration_seconds_sum", outcome="succeeded") > 0
    assert value(after, "spectator_scrapes_total", outcome="ok") >= 2  # before and after the probe
    assert value(after, "spectator_scrapes_total", outcome="failed") >= 1  # the unreachable server
    assert value(after, "spectator_emails_total", outcome="sent") == 1
    # Scrape lag comes from the database: a server never scraped since an hour ago is ~an hour behind.
    Server.objects.filter(pk=gone.pk).update(created_at=timezone.now() - timedelta(hours=1))
    lag = value(scrape_metrics(client), "spectator_scrape_lag_seconds", server="gone")
    assert 3000 < lag < 3700
    assert value(after, "spectator_scrape_lag_seconds", server="engine") < 60
