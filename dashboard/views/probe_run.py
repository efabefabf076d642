"""One probe run: every measurement with raw timings, fingerprint, load before/after, baseline comparison."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard import queries
from dashboard.views.access import get_run_for_user


@require_GET
def probe_run(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    return render(request, "dashboard/probe_run.html", {
        "run": run,
        "measurements": run.measurements.order_by("kind", "context", "output_len", "repeat"),
        "diff": queries.diff_lines(run) if run.status == run.Status.SUCCEEDED else [],
        "fingerprint_label": queries.fingerprint_label(run.fingerprint),
    })


@require_GET
def probe_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The small fragment htmx polls while a run is queued or running; it stops polling once finished."""
    run = get_run_for_user(request.user, run_id)
    diff = queries.diff_lines(run) if run.status == run.Status.SUCCEEDED else []
    return render(request, "dashboard/_probe_status.html", {"run": run, "diff": diff})
