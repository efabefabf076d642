"""The fragments the fleet and server pages poll: they carry the new data, say when they were refreshed,
and say plainly when a server has gone quiet."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboard.pages import figure, scrape

pytestmark = pytest.mark.django_db


def test_it_polls_the_server_fragment_at_the_scrape_interval(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    server = make_server(scrape_interval_s=15)
    store_run(server, {64: 120.0}, hours_ago=2)
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/?range=6h").content.decode()
    assert f'hx-get="/servers/{server.pk}/live/?range=6h" hx-trigger="every 15s"' in page
    assert "last refreshed" in page and 'data-runs="1"' in page

    store_run(server, {64: 118.0}, hours_ago=0.1)  # a probe lands; the next poll brings it
    fragment = client.get(f"/servers/{server.pk}/live/?range=6h").content.decode()
    assert "<html" not in fragment
    assert 'data-runs="2"' in fragment and 'id="refreshed-at"' in fragment
    assert figure(fragment, "fig-decode_time")["data"][0]["y"] == [120.0, 118.0]
    assert 'id="history-section" hx-swap-oob="true"' in fragment


def test_it_says_when_a_server_has_gone_quiet(client: Any, viewer: Any, make_server: Any) -> None:
    quiet, fresh = make_server("quiet-box", scrape_interval_s=60), make_server("fresh-box", scrape_interval_s=60)
    scrape(quiet, 4)  # 4 min > 3 intervals of 60 s
    scrape(fresh, 0.5)
    client.force_login(viewer)
    page = client.get(f"/servers/{quiet.pk}/").content.decode()
    assert 'data-status="quiet"' in page
    assert "quiet-box has gone quiet: no scrape for 4 min (expected every 60 s)." in page
    assert "gone quiet" not in client.get(f"/servers/{fresh.pk}/").content.decode()
    fleet = client.get("/fleet/rows/").content.decode()
    assert f'id="server-row-{quiet.pk}" data-status="quiet"' in fleet
    assert f'id="server-row-{fresh.pk}" data-status="up"' in fleet
    assert fleet.count("has gone quiet") == 1


def test_it_refreshes_the_fleet_rows(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server(scrape_interval_s=10)
    client.force_login(viewer)
    page = client.get("/").content.decode()
    assert 'hx-get="/fleet/rows/?range=24h" hx-trigger="every 10s"' in page
    assert "no probe yet" in page
    store_run(server, {64: 120.0, 1024: 99.5})
    rows = client.get("/fleet/rows/").content.decode()
    assert "<strong>99.5</strong>" in rows and "last refreshed" in rows
    assert figure(rows, f"trend-{server.pk}")["data"][0]["y"] == [99.5]


def test_it_keeps_outsiders_out_of_the_fragments(client: Any, charlie: Any, make_server: Any) -> None:
    server = make_server()
    client.force_login(charlie)
    assert client.get(f"/servers/{server.pk}/live/").status_code == 403
    assert client.get("/fleet/rows/").status_code == 403
    client.logout()
    assert client.get("/fleet/rows/").status_code == 302  # to the login page
