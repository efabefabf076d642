"""The fleet: every server's status, latest decode tok/s per context, latest τ, last probe, a trend.

The table body is a fragment (`fleet_rows`) the page polls, so statuses and numbers follow the scrapes and
probes without a reload.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.models import ProbeRun
from dashboard import charts, queries
from dashboard.timerange import TimeRange, time_range
from dashboard.views.access import require_read

MIN_REFRESH_S, MAX_REFRESH_S = 5, 60


def _row(server: Any, trend: list[ProbeRun]) -> dict[str, Any]:
    """One fleet row from a server annotated by queries.fleet_servers (no further queries)."""
    latest = server.latest_run
    return {
        "server": server,
        "status": queries.status_of(server, server.probing, server.scraped_at, server.scrape_ok),
        "quiet": queries.quiet_notice(server, server.scraped_at),
        "latest": latest,
        "decode": queries.decode_by_context(latest) if latest else {},
        "tau": server.tau if server.tau is not None else (queries.run_tau(latest) if latest else None),
        "acceptance_rate": server.acceptance_rate,
        "budget": queries.budget_label(latest.fingerprint) if latest else "",
        "trend": charts.sparkline(trend),
        "trend_id": f"trend-{server.pk}",
    }


def _context(window: TimeRange) -> dict[str, Any]:
    servers = queries.fleet_servers()
    trends = queries.sampled_runs(window.since, window.until)
    # The fastest scrape interval in the fleet sets the refresh, within sane bounds.
    refresh = min((s.scrape_interval_s for s in servers), default=MAX_REFRESH_S)
    return {
        "rows": [_row(server, trends.get(server.pk, [])) for server in servers],
        "window": window,
        "refreshed_at": timezone.now(),
        "refresh_s": min(max(refresh, MIN_REFRESH_S), MAX_REFRESH_S),
    }


@require_GET
def fleet(request: HttpRequest) -> HttpResponse:
    require_read(request.user)
    return render(request, "dashboard/fleet.html", _context(time_range(request)))


@require_GET
def fleet_rows(request: HttpRequest) -> HttpResponse:
    """The fragment the fleet page polls."""
    require_read(request.user)
    return render(request, "dashboard/_fleet_rows.html", _context(time_range(request)))
