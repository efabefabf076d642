"""The time-range picker: presets, a validated custom range, and scrapes downsampled by the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard.timerange import bucket_seconds
from tests.dashboard.pages import figure, scrape

pytestmark = pytest.mark.django_db


def test_it_picks_buckets_that_keep_a_chart_under_a_few_hundred_points() -> None:
    assert bucket_seconds(timedelta(hours=6)) == 60
    assert bucket_seconds(timedelta(hours=24)) == 300
    assert bucket_seconds(timedelta(days=2)) == 600
    assert bucket_seconds(timedelta(days=7)) == 3600  # from two days on: hourly rollups or coarser
    assert bucket_seconds(timedelta(days=30)) == 7200


def test_it_shows_a_custom_range(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server()
    store_run(server, {64: 50.0}, hours_ago=24 * 10)
    store_run(server, {64: 80.0}, hours_ago=24 * 5)
    store_run(server, {64: 120.0}, hours_ago=1)
    start = timezone.now() - timedelta(days=6)
    end = timezone.now() - timedelta(days=4)
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/", {"range": "custom", "start": f"{start:%Y-%m-%dT%H:%M}",
                                                 "end": f"{end:%Y-%m-%dT%H:%M}"}).content.decode()
    assert figure(page, "fig-decode_time")["data"][0]["y"] == [80.0]
    assert 'id="range-errors"' not in page
    assert "hx-get" not in page.split('id="server-live"')[1].split(">")[0]  # a past range is not polled


@pytest.mark.parametrize(("start", "end", "error"), [
    ("2026-11-20T10:00", "2026-11-20T09:00", "The start of the range must be before its end."),
    ("2026-11-20T10:00", "2026-11-20T10:00", "The start of the range must be before its end."),
    ("yesterday", "2026-11-20T09:00", "Start time: use YYYY-MM-DD HH:MM (UTC)."),
    ("2026-11-20T10:00", "2026-13-40T09:00", "End time: use YYYY-MM-DD HH:MM (UTC)."),
    ("", "2026-11-20T09:00", "Give a start time."),
    ("2026-01-01T00:00", "2026-11-20T09:00", "A range may span at most 92 days."),
])
def test_it_explains_a_bad_custom_range(
    client: Any, viewer: Any, make_server: Any, start: str, end: str, error: str
) -> None:
    server = make_server()
    client.force_login(viewer)
    for url in ("/", f"/servers/{server.pk}/"):
        response = client.get(url, {"range": "custom", "start": start, "end": end})
        assert response.status_code == 200  # the default range is shown, with the error above it
        page = response.content.decode()
        assert 'id="range-errors"' in page and error in page, url


def test_it_downsamples_scrapes_in_the_database(client: Any, viewer: Any, make_server: Any) -> None:
    from collectors.models import Scrape

    server = make_server()
    # 6 days of 15-minute scrapes: the 7-day view groups them into hour buckets (four scrapes each).
    origin = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=7) + timedelta(hours=1)
    rows = [Scrape(server=server, at=origin + timedelta(minutes=15 * i), tau=2.0 + (i % 2), acceptance_rate=0.5,
                   running=float(i % 2), waiting=0.0, kv_usage=0.1, generation_tokens=300.0 * (i % 2 + 1),
                   window_s=900.0) for i in range(4 * 24 * 6)]
    Scrape.objects.bulk_create(rows)
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/?range=7d").content.decode()
    tau = figure(page, "fig-tau")["data"][0]
    assert len(tau["x"]) == 24 * 6  # a quarter as many points as rows
    assert set(tau["y"]) == {2.5}  # each bucket the mean of a 2.0 and a 3.0 window
    live = {t["name"]: t["y"] for t in figure(page, "fig-live")["data"]}
    assert set(live["generation tok/s"]) == {1800.0 / 3600.0}  # Σ tokens / Σ seconds, not a mean of rates
    assert set(live["running"]) == {0.5}
    scrape(server, 1)  # and the 6-hour view draws the recent one at its own minute
    six = figure(client.get(f"/servers/{server.pk}/?range=6h").content.decode(), "fig-tau")["data"][0]
    assert six["y"][-1] == 3.1


def test_it_thins_a_long_run_history_in_the_database(
    client: Any, viewer: Any, make_server: Any, store_run: Any, monkeypatch: Any
) -> None:
    from dashboard import queries

    monkeypatch.setattr(queries, "MAX_RUN_POINTS", 4)
    server = make_server()
    # Six runs in three 5-minute buckets of the 24 h view (two each, 2 minutes apart).
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    start -= timedelta(minutes=start.minute % 5)
    for i, value in enumerate((100.0, 101.0, 110.0, 111.0, 120.0, 121.0)):
        run = store_run(server, {64: value}, hours_ago=0)
        run.finished_at = start + timedelta(minutes=5 * (i // 2) + 2 * (i % 2))
        run.save()
    client.force_login(viewer)
    fig = figure(client.get(f"/servers/{server.pk}/?range=24h").content.decode(), "fig-decode_time")
    assert fig["data"][0]["y"] == [101.0, 111.0, 121.0]  # the newest run of each bucket
    assert "newest run per 5 min shown" in fig["layout"]["title"]["text"]
    monkeypatch.setattr(queries, "MAX_RUN_POINTS", 400)
    fig = figure(client.get(f"/servers/{server.pk}/?range=24h").content.decode(), "fig-decode_time")
    assert len(fig["data"][0]["y"]) == 6 and "shown" not in fig["layout"]["title"]["text"]
