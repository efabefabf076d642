"""A monitored server's API key never appears in logs, pages or e-mails (issue 8): a real probe of the
bundled engine with a key, a hostile server that echoes the request's headers back, every page that shows
the server, and the alert e-mail."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from tests.collectors.http_stub import http_stub
from tests.collectors.live import SMALL_PLAN

pytestmark = pytest.mark.django_db

KEY = f"sk-spectator-{uuid.uuid4().hex}"


def _echo(method: str, path: str, headers: dict[str, str]) -> tuple[int, str, bytes]:
    # A misconfigured proxy that puts the request's headers into its answer: 400 for JSON calls (not
    # retried), 200 with non-Prometheus text for /metrics.
    text = json.dumps(headers).encode()
    return (200, "text/plain", b"not metrics " + text) if path == "/metrics" else (400, "application/json", text)


def _rows_text(server: Any) -> str:
    from collectors.models import ProbeRun, Scrape

    runs = list(ProbeRun.objects.filter(server=server).values())
    scrapes = list(Scrape.objects.filter(server=server).values("error", "totals"))
    return json.dumps([runs, scrapes], default=str)


def test_it_keeps_the_api_key_out_of_logs_rows_pages_and_emails(engine: Any, make_server: Any, alice: Any,
                                                               caplog: Any, settings: Any) -> None:
    from collectors.models import ProbeRun
    from collectors.notify import send_notification
    from collectors.probing import ProbeFailed, run_probe_for_server
    from tests.collectors.notify_helpers import opened_alert

    caplog.set_level(logging.DEBUG)  # everything any library logs, httpx and httpcore included
    good = make_server("with-key", engine.url, kind="ddtree", api_key=KEY, probe_plan=SMALL_PLAN)
    assert run_probe_for_server(good.pk, ProbeRun.Trigger.MANUAL).status == "succeeded"
    with http_stub(_echo) as stub:
        hostile = make_server("echoes-headers", stub.url, kind="ddtree", api_key=KEY, probe_plan=SMALL_PLAN)
        with pytest.raises(ProbeFailed):
            run_probe_for_server(hostile.pk, ProbeRun.Trigger.MANUAL)
        # The key was sent (as a bearer token) and came back in the answers…
        assert any(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in stub.requests)
    failed = ProbeRun.objects.get(server=hostile)
    assert failed.status == "failed" and "[api key]" in failed.error  # …and was blanked out of what we kept
    for server in (good, hostile):
        assert KEY not in _rows_text(server)
    assert KEY not in caplog.text

    # Pages: every one that shows these servers, their runs or the alerts, and the admin's.
    client = Client()
    client.force_login(alice)
    run = ProbeRun.objects.get(server=good)
    pages = [reverse("dashboard-fleet"), reverse("dashboard-alerts"), reverse("dashboard-run", args=[run.pk]),
             reverse("dashboard-run", args=[failed.pk]), reverse("dashboard-run-status", args=[failed.pk]),
             "/admin/collectors/server/", "/admin/collectors/proberun/", "/admin/collectors/scrape/",
             f"/admin/collectors/proberun/{failed.pk}/change/"]
    for server in (good, hostile):
        pages += [reverse("dashboard-server", args=[server.pk]), reverse("dashboard-server-edit", args=[server.pk]),
                  f"/admin/collectors/server/{server.pk}/change/"]
    for page in pages:
        r = client.get(page)
        assert r.status_code == 200, page
        assert KEY not in r.content.decode(), page

    # E-mails: the alert-opened mail about this server.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    _, notifications = opened_alert(good, emails=["ops@example.org"])
    assert send_notification(notifications[0].pk)
    assert len(mail.outbox) == 1
    message = mail.outbox[0].message().as_string()
    assert good.name in message and KEY not in message
