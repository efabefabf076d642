from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_it_creates_the_three_roles_when_the_database_is_migrated(db: Any) -> None:
    from django.contrib.auth.models import Group

    perms = {g.name: {p.codename for p in g.permissions.all()} for g in Group.objects.all()}
    assert "add_proberun" not in perms["viewer"] and "view_server" in perms["viewer"]
    assert "add_proberun" in perms["operator"] and "add_server" not in perms["operator"]
    assert {"add_server", "change_server", "add_proberun"} <= perms["staff"]


def test_it_forbids_a_viewer_to_run_a_probe(
    client: Any, viewer: Any, make_server: Any, sent_probes: list[Any]
) -> None:
    server = make_server()
    client.force_login(viewer)
    assert b"Run probe now" not in client.get(f"/servers/{server.pk}/").content
    assert client.post(f"/servers/{server.pk}/probe/").status_code == 403
    assert server.probe_runs.count() == 0 and sent_probes == []


def test_it_lets_an_operator_run_a_probe(
    client: Any, operator: Any, make_server: Any, sent_probes: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    server = make_server()
    client.force_login(operator)
    assert b"Run probe now" in client.get(f"/servers/{server.pk}/").content
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/servers/{server.pk}/probe/")
    assert r.status_code == 302 and r["Location"] == f"/servers/{server.pk}/"
    run = server.probe_runs.get()
    assert (run.trigger, run.status, run.requested_by) == ("manual", "queued", operator)
    assert sent_probes == [(server.pk, "manual", run.pk)]


def test_it_lets_only_staff_add_servers(client: Any, operator: Any, staff: Any) -> None:
    data = {"name": "new-box", "base_url": "http://10.0.0.5:30000", "kind": "auto", "probe_plan": "{}",
            "probe_interval_s": 3600, "scrape_interval_s": 30, "enabled": "on"}
    client.force_login(operator)
    assert client.get("/servers/add/").status_code == 403
    assert client.post("/servers/add/", data).status_code == 403
    client.force_login(staff)
    r = client.post("/servers/add/", data)
    assert r.status_code == 302
    from collectors.models import Server

    assert Server.objects.get(name="new-box").base_url == "http://10.0.0.5:30000"


def test_it_makes_the_make_run_admin_staff(db: Any, settings: Any, tmp_path: Any, monkeypatch: Any) -> None:
    from collectors.management.commands.run import ensure_admin

    settings.DATA_DIR = tmp_path
    monkeypatch.setenv("SPECTATOR_ADMIN_PASSWORD", "pw-for-the-test")
    from django.contrib.auth import get_user_model

    ensure_admin("admin")
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.has_perms(["collectors.add_server", "collectors.change_server",
                                               "collectors.add_proberun"])
