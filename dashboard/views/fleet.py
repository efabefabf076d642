"""The fleet: every server's status, latest decode tok/s per context, latest τ, last probe, a trend."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from collectors.models import Server
from dashboard import charts, queries
from dashboard.timerange import time_range
from dashboard.views.access import require_read


def _row(server: Server, since: Any) -> dict[str, Any]:
    runs = queries.succeeded_runs(server, since)
    latest = queries.latest_run(server)
    latest_scrape = server.scrapes.order_by("-at").first()
    tau_scrape = server.scrapes.filter(ok=True, tau__isnull=False).order_by("-at").first()
    return {
        "server": server,
        "status": queries.status(server, latest_scrape),
        "latest": latest,
        "decode": queries.decode_by_context(latest) if latest else {},
        "tau": tau_scrape.tau if tau_scrape else (queries.run_tau(latest) if latest else None),
        "acceptance_rate": tau_scrape.acceptance_rate if tau_scrape else None,
        "trend": charts.sparkline(runs),
        "trend_id": f"trend-{server.pk}",
    }


@require_GET
def fleet(request: HttpRequest) -> HttpResponse:
    require_read(request.user)
    window = time_range(request)
    rows = [_row(server, window.since) for server in Server.objects.all()]
    return render(request, "dashboard/fleet.html", {"rows": rows, "window": window})
