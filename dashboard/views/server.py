"""One server: throughput vs context, decode and τ over time, output sweep, streaming, live panel, history."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from collectors.models import ProbeRun, Scrape
from dashboard import charts, queries
from dashboard.roles import CAN_EDIT_SERVERS, CAN_PROBE
from dashboard.timerange import time_range
from dashboard.views.access import get_server_for_user

HISTORY_ROWS = 50


def _figures(runs: list[ProbeRun], scrapes: list[Scrape]) -> dict[str, charts.Figure]:
    latest = runs[-1] if runs else None
    measurements = list(latest.measurements.all()) if latest else []
    return {
        "throughput": charts.throughput_vs_context(runs, queries.baselines(latest) if latest else None),
        "decode_time": charts.decode_over_time(runs),
        "tau": charts.tau_over_time(runs, scrapes),
        "sweep": charts.output_sweep(runs),
        "streaming": charts.streaming_vs_plain(latest, measurements),
        "live": charts.live_panel(scrapes),
    }


@require_GET
def server_detail(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id)
    window = time_range(request)
    runs = queries.succeeded_runs(server, window.since)
    scrapes = queries.scrapes(server, window.since)
    latest_scrape = server.scrapes.order_by("-at").first()
    return render(request, "dashboard/server.html", {
        "server": server,
        "window": window,
        "status": queries.status(server, latest_scrape),
        "latest_scrape": latest_scrape,
        "figures": _figures(runs, scrapes),
        "history": server.probe_runs.select_related("requested_by").defer("summary", "acceptance")[:HISTORY_ROWS],
        "active_run": queries.active_manual_run(server),
        "can_probe": request.user.has_perm(CAN_PROBE),
        "can_edit": request.user.has_perms(CAN_EDIT_SERVERS),
    })
