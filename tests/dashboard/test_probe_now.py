from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_it_queues_at_most_one_manual_probe_per_server(
    client: Any, operator: Any, make_server: Any, sent_probes: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    server = make_server()
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/servers/{server.pk}/probe/")
        r = client.post(f"/servers/{server.pk}/probe/", follow=True)
    assert server.probe_runs.count() == 1 and len(sent_probes) == 1
    assert "already queued or running" in r.content.decode()
    server.probe_runs.update(status="running")
    client.post(f"/servers/{server.pk}/probe/")
    assert server.probe_runs.count() == 1
    server.probe_runs.update(status="succeeded")
    client.post(f"/servers/{server.pk}/probe/")
    assert server.probe_runs.count() == 2  # the earlier one finished: a new one may start


def test_it_polls_the_status_while_the_run_is_queued_or_running(
    client: Any, operator: Any, make_server: Any, sent_probes: Any
) -> None:
    server = make_server()
    client.force_login(operator)
    client.post(f"/servers/{server.pk}/probe/")
    run = server.probe_runs.get()
    page = client.get(f"/servers/{server.pk}/").content.decode()
    assert f'hx-get="/runs/{run.pk}/status/"' in page and 'data-status="queued"' in page
    run.status, run.current_step = "running", "two_point ctx=1024 repeat 1/3"
    run.save()
    fragment = client.get(f"/runs/{run.pk}/status/").content.decode()
    assert 'hx-trigger="every 2s"' in fragment and "two_point ctx=1024 repeat 1/3" in fragment


def test_it_stops_polling_and_shows_the_diff_when_the_run_is_done(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    server = make_server()
    for hours, value in ((5, 114.0), (4, 115.0), (3, 116.2)):
        store_run(server, {3072: value}, hours_ago=hours)
    run = store_run(server, {3072: 112.4}, hours_ago=1, trigger="manual")
    client.force_login(viewer)
    fragment = client.get(f"/runs/{run.pk}/status/").content.decode()
    assert "hx-trigger" not in fragment and 'data-status="succeeded"' in fragment
    assert "decode tok/s at 3072: 112.4, baseline 115.0 ± 1.0, −2.3 %" in fragment


def test_it_shows_why_a_run_failed(client: Any, viewer: Any, make_server: Any) -> None:
    from collectors.models import ProbeRun

    server = make_server()
    run = ProbeRun.objects.create(server=server, trigger="manual", status="failed", error="connect refused",
                                  current_step="failed during: fingerprint")
    client.force_login(viewer)
    fragment = client.get(f"/runs/{run.pk}/status/").content.decode()
    assert "connect refused" in fragment and "hx-trigger" not in fragment
    assert ProbeRun.objects.count() == 1
