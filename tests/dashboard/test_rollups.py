"""Hourly scrape rollups: what the long ranges read. They must give the same chart as the raw scrapes,
stay complete when the rollup task lags, and be idempotent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from collectors.models import Scrape, ScrapeRollup
from collectors.rollups import roll_up
from dashboard.queries import scrape_buckets

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


def _scrapes(server: Any, hours: int) -> None:
    start = NOW - timedelta(hours=hours)
    Scrape.objects.bulk_create([
        Scrape(server=server, at=start + timedelta(minutes=5 * i), tau=2.0 + (i % 3), acceptance_rate=0.1 * (i % 2),
               running=float(i % 4), waiting=None if i % 5 else 1.0, kv_usage=0.5, generation_tokens=100.0 + i,
               window_s=300.0)
        for i in range(hours * 12)
    ] + [Scrape(server=server, at=start + timedelta(minutes=1), ok=False, error="refused")])


def test_it_charts_the_same_from_rollups_as_from_raw_scrapes(make_server: Any) -> None:
    server = make_server()
    _scrapes(server, 72)
    since, until = NOW - timedelta(hours=80), NOW
    raw = scrape_buckets(server, since, until, 7200)
    assert roll_up(NOW) == 72  # every complete hour (12:00–12:30 is not complete yet)
    assert ScrapeRollup.objects.filter(server=server).count() == 72
    rolled = scrape_buckets(server, since, until, 7200)
    assert len(rolled) == len(raw) == 37  # 36 two-hour buckets and the half-open one at the end
    for a, b in zip(raw, rolled, strict=True):
        assert a.at == b.at and a.n == b.n
        for field in ("tau", "acceptance_rate", "running", "waiting", "kv_usage", "generation_tps"):
            assert getattr(a, field) == pytest.approx(getattr(b, field)), field
    assert roll_up(NOW) == 2  # again: only the newest hour and the one before are re-counted
    assert ScrapeRollup.objects.filter(server=server).count() == 72


def test_it_reads_raw_scrapes_after_the_newest_rollup(make_server: Any) -> None:
    server = make_server()
    _scrapes(server, 10)
    roll_up(NOW - timedelta(hours=6))  # the task stopped four hours ago
    Scrape.objects.filter(server=server, at__lt=NOW - timedelta(hours=9)).delete()  # rollups outlive scrapes
    buckets = scrape_buckets(server, NOW - timedelta(hours=12), NOW, 3600)
    # 02:00–05:00 from rollups (their raw scrapes partly deleted), 06:00–12:00 from raw scrapes.
    assert [b.n for b in buckets] == [6] + [12] * 9 + [6]
    assert buckets[0].at == NOW.replace(minute=0) - timedelta(hours=10)


def test_it_runs_as_a_celery_task(make_server: Any) -> None:
    from collectors.tasks import rollup_scrapes

    server = make_server()
    _scrapes(server, 3)
    rollup_scrapes.apply()  # in this process: the task is a thin wrapper
    assert ScrapeRollup.objects.filter(server=server).count() >= 2
