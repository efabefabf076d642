"""Rate limits on failed logins and manual probes (issue 8), counted in the real shared cache."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _login(client: Client, username: str, password: str, ip: str = "10.1.1.1") -> Any:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_it_locks_a_username_out_after_too_many_failed_logins(client: Client, viewer: Any, settings: Any) -> None:
    settings.SPECTATOR_LOGIN_FAILURES_PER_USER = 3
    for _ in range(3):
        assert _login(client, "bob", "wrong").status_code == 200  # the form again, with its error
    r = _login(client, "bob", "bob-password")  # even the right password, until the window ends
    assert r.status_code == 429 and int(r["Retry-After"]) > 0
    assert "Too many failed logins" in r.content.decode()
    assert client.get("/").status_code == 302  # not logged in
    # Another user from the same address is not affected (the per-address limit is higher).
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("zoe", password="zoe-password")
    assert _login(client, "zoe", "zoe-password").status_code == 302


def test_it_limits_failed_logins_per_address_across_usernames(client: Client, viewer: Any, settings: Any) -> None:
    settings.SPECTATOR_LOGIN_FAILURES_PER_IP = 4
    for i in range(4):
        assert _login(client, f"guess{i}", "wrong", ip="10.2.2.2").status_code == 200
    assert _login(client, "bob", "bob-password", ip="10.2.2.2").status_code == 429
    assert _login(client, "bob", "bob-password", ip="10.3.3.3").status_code == 302  # another address is fine


def test_it_never_counts_successful_logins(client: Client, viewer: Any, settings: Any) -> None:
    settings.SPECTATOR_LOGIN_FAILURES_PER_USER = 2
    for _ in range(5):
        assert _login(client, "bob", "bob-password").status_code == 302
        client.post("/logout/")


def test_it_reads_the_client_address_from_the_proxy_header_when_told(client: Client, viewer: Any,
                                                                     settings: Any) -> None:
    settings.SPECTATOR_CLIENT_IP_HEADER = "X-Forwarded-For"
    settings.SPECTATOR_LOGIN_FAILURES_PER_IP = 2
    for _ in range(2):  # the first entry is whatever the client claimed; the proxy appended the last
        client.post("/login/", {"username": "x", "password": "y"}, REMOTE_ADDR="10.0.0.1",
                    HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9")
    # The proxy's own entry (the last one) is the client: 203.0.113.9 is locked out, 203.0.113.10 is not.
    r = client.post("/login/", {"username": "bob", "password": "bob-password"}, REMOTE_ADDR="10.0.0.1",
                    HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert r.status_code == 429
    r = client.post("/login/", {"username": "bob", "password": "bob-password"}, REMOTE_ADDR="10.0.0.1",
                    HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert r.status_code == 302


def test_it_limits_manual_probes_per_user(client: Client, operator: Any, make_server: Any, sent_probes: list[Any],
                                          settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    from collectors.models import ProbeRun

    settings.SPECTATOR_MANUAL_PROBES_PER_USER = 2
    servers = [make_server(f"box-{i}") for i in range(3)]  # one server each: the one-active-run rule stays out
    client.force_login(operator)
    for server in servers[:2]:
        with django_capture_on_commit_callbacks(execute=True):
            assert client.post(f"/servers/{server.pk}/probe/").status_code == 302
    r = client.post(f"/servers/{servers[2].pk}/probe/", follow=True)
    assert "Too many manual probes (2 allowed per window)" in r.content.decode()
    assert ProbeRun.objects.count() == 2 and len(sent_probes) == 2
