"""Who may read the dashboard's own /metrics (issue 8): staff, an allowed address, or the bearer token.
No login redirect (Prometheus does not follow one): everyone else gets 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_refuses_anonymous_readers_and_non_staff_users(client: Client, operator: Any) -> None:
    assert client.get("/metrics").status_code == 403
    client.force_login(operator)  # an operator is not staff
    assert client.get("/metrics").status_code == 403


def test_it_serves_staff(client: Client, staff: Any) -> None:
    client.force_login(staff)
    r = client.get("/metrics")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    assert "# TYPE spectator_probe_runs_total counter" in r.content.decode()
    assert r["Cache-Control"].startswith("max-age=0")


def test_it_accepts_the_bearer_token_and_nothing_like_it(client: Client, settings: Any) -> None:
    settings.SPECTATOR_METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    for wrong in ("Bearer s3cret-toke", "Bearer ", "s3cret-token", "Basic s3cret-token"):
        assert client.get("/metrics", HTTP_AUTHORIZATION=wrong).status_code == 403, wrong
    settings.SPECTATOR_METRICS_TOKEN = ""  # no token configured: an empty bearer must not match it
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_it_accepts_addresses_in_the_allowlist(client: Client, settings: Any) -> None:
    settings.SPECTATOR_METRICS_ALLOW_FROM = ["10.9.0.0/16", "192.0.2.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.9.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.8.3.4").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403  # loopback is not implied
