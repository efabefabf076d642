from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

VALID = {"name": "box", "base_url": "http://10.0.0.5:30000", "kind": "auto", "probe_plan": "{}",
         "probe_interval_s": 3600, "scrape_interval_s": 30, "enabled": "on"}


def _errors(client: Any, **changes: Any) -> str:
    r = client.post("/servers/add/", {**VALID, **changes})
    assert r.status_code == 400
    return r.content.decode()


def test_it_accepts_only_http_and_https_urls(client: Any, staff: Any) -> None:
    client.force_login(staff)
    assert "Enter an http:// or https:// URL." in _errors(client, base_url="ftp://10.0.0.5/")
    assert "Enter an http:// or https:// URL." in _errors(client, base_url="javascript:alert(1)")


def test_it_explains_a_probe_plan_out_of_bounds(client: Any, staff: Any) -> None:
    client.force_login(staff)
    assert "need 1 &lt;= n1 &lt; n2" in _errors(client, probe_plan='{"n1": 400, "n2": 320}')
    assert "contexts values must be between 16 and 262144" in _errors(client, probe_plan='{"contexts": [8]}')
    assert "unknown keys: bogus" in _errors(client, probe_plan='{"bogus": 1}')
    assert "Enter a valid JSON." in _errors(client, probe_plan="{not json")
    assert "greater than or equal to 60" in _errors(client, probe_interval_s=10)


def test_it_edits_a_server_and_keeps_its_key_when_left_blank(client: Any, staff: Any, make_server: Any) -> None:
    server = make_server(api_key="secret-key")
    client.force_login(staff)
    page = client.get(f"/servers/{server.pk}/edit/").content.decode()
    assert "secret-key" not in page
    r = client.post(f"/servers/{server.pk}/edit/", {**VALID, "name": "renamed", "api_key": "",
                                                    "probe_plan": '{"contexts": [64, 1024]}'})
    assert r.status_code == 302
    server.refresh_from_db()
    assert (server.name, server.api_key, server.probe_plan) == ("renamed", "secret-key", {"contexts": [64, 1024]})
