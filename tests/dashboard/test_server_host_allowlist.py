"""The server form (and the admin) refuse a host outside SPECTATOR_ALLOWED_SERVER_HOSTS (issue 8)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

DATA = {"name": "box", "kind": "auto", "probe_plan": "{}", "probe_interval_s": 3600, "scrape_interval_s": 30,
        "enabled": "on"}


def test_it_refuses_a_host_outside_the_allowlist_in_the_form(client: Any, staff: Any, settings: Any) -> None:
    from collectors.models import Server

    settings.SPECTATOR_ALLOWED_SERVER_HOSTS = ["10.0.0.0/8", ".gpu.example.org"]
    client.force_login(staff)
    for url in ("http://169.254.169.254/latest/", "http://127.0.0.1:30000", "http://localhost:30000"):
        r = client.post("/servers/add/", {**DATA, "base_url": url})
        assert r.status_code == 400 and "is not in SPECTATOR_ALLOWED_SERVER_HOSTS" in r.content.decode(), url
    assert not Server.objects.exists()
    assert client.post("/servers/add/", {**DATA, "base_url": "http://10.0.0.5:30000"}).status_code == 302
    assert client.post("/servers/add/", {**DATA, "name": "b2", "base_url": "https://a.gpu.example.org"}).status_code \
        == 302


def test_it_refuses_a_host_outside_the_allowlist_in_the_admin(client: Any, alice: Any, settings: Any) -> None:
    from collectors.models import Server

    settings.SPECTATOR_ALLOWED_SERVER_HOSTS = ["10.0.0.0/8"]
    client.force_login(alice)
    data = {**DATA, "base_url": "http://127.0.0.1:30000", "probe_plan": "{}", "api_key": ""}
    r = client.post("/admin/collectors/server/add/", data)
    assert r.status_code == 200 and "is not in SPECTATOR_ALLOWED_SERVER_HOSTS" in r.content.decode()
    assert not Server.objects.exists()
