"""One server: throughput vs context, decode and τ over time, acceptance, output sweep, streaming, live panel,
history. The page polls `server_live` (a fragment with the status, the figures' JSON and the history) every
scrape interval, and plotly.js redraws the charts in place from the new JSON (base.html), so new scrapes
and probe runs appear without a reload.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.models import ChangePoint, Server
from dashboard import charts, queries
from dashboard.roles import CAN_EDIT_SERVERS, CAN_PROBE
from dashboard.timerange import TimeRange, time_range
from dashboard.views.access import get_server_for_user

HISTORY_ROWS = 25  # the newest runs; each run's page has the rest


def _figures(server: Server, window: TimeRange) -> dict[str, charts.Figure]:
    # A long window of frequent probes is thinned in the database to one run per chart bucket.
    thinned = queries.run_bucket(server, window.since, window.until, window.bucket_s)
    runs = queries.succeeded_runs(server, window.since, window.until, thinned)
    latest = queries.full_run(runs[-1] if runs else None)
    measurements = list(latest.measurements.all()) if latest else []
    buckets = queries.scrape_buckets(server, window.since, window.until, window.bucket_s)
    change_points = list(ChangePoint.objects.filter(
        server=server, quantity="decode_tps", at__gte=window.since, at__lte=window.until).order_by("at"))
    budget = queries.budget_label(latest.fingerprint) if latest else ""
    return {
        "throughput": charts.throughput_vs_context(runs, queries.baselines(latest) if latest else None),
        "decode_time": charts.decode_over_time(runs, change_points, thinned),
        "tau": charts.tau_over_time(runs, buckets),
        "acceptance": charts.acceptance_rate_over_time(runs, buckets, budget),
        "acceptance_budget": charts.acceptance_vs_budget(runs, buckets, queries.budget_value(
            latest.fingerprint) if latest else None),
        "per_position": charts.per_position(latest, queries.per_position_rates(server, window.since, window.until),
                                            budget),
        "acceptance_context": charts.acceptance_vs_context(measurements, queries.budget_value(
            latest.fingerprint) if latest else None),
        "sweep": charts.output_sweep(runs),
        "streaming": charts.streaming_vs_plain(latest, measurements),
        "live": charts.live_panel(buckets),
    }


def _live_context(server: Server, window: TimeRange) -> dict[str, Any]:
    """What the self-refreshing part of the page shows; the page and its fragment both render it."""
    latest_scrape = server.scrapes.order_by("-at").first()
    return {
        "server": server,
        "window": window,
        "status": queries.status(server, latest_scrape),
        "quiet": queries.quiet_notice(server, latest_scrape.at if latest_scrape else None),
        "latest_scrape": latest_scrape,
        "last_data_at": queries.last_data_at(server),
        "refreshed_at": timezone.now(),
        "figures": _figures(server, window),
        "run_count": server.probe_runs.count(),
        "history": server.probe_runs.select_related("requested_by").defer("summary", "acceptance")[:HISTORY_ROWS],
    }


@require_GET
def server_detail(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id)
    window = time_range(request)
    return render(request, "dashboard/server.html", {
        **_live_context(server, window),
        "active_run": queries.active_manual_run(server),
        "can_probe": request.user.has_perm(CAN_PROBE),
        "can_edit": request.user.has_perms(CAN_EDIT_SERVERS),
    })


@require_GET
def server_live(request: HttpRequest, server_id: int) -> HttpResponse:
    """The fragment the server page polls (htmx) every scrape interval."""
    server = get_server_for_user(request.user, server_id)
    return render(request, "dashboard/_server_live.html", _live_context(server, time_range(request)))
