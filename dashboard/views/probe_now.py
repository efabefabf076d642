""""Run probe now": a POST that queues one manual ProbeRun and its Celery task, then redirects."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from collectors.models import ProbeRun, Server
from collectors.probing import queue_run
from collectors.tasks import enqueue_probe
from dashboard import queries, ratelimit
from dashboard.roles import CAN_PROBE
from dashboard.views.access import get_server_for_user


def queue_manual_probe(server: Server, user: object) -> ProbeRun | None:
    """The new run, or None when a manual run is already queued or running on this server.

    The server row is locked for the check-then-insert (Postgres), so two clicks cannot both queue;
    SQLite serialises writers anyway. The task is sent only after commit, so the worker finds the row.
    """
    with transaction.atomic():
        Server.objects.select_for_update().filter(pk=server.pk).first()
        if queries.active_manual_run(server):
            return None
        run = queue_run(server, ProbeRun.Trigger.MANUAL, requested_by=user)
        transaction.on_commit(lambda: enqueue_probe(server, run))
    return run


def manual_probe_limit(request: HttpRequest) -> str:
    """The refusal message when this user has queued too many manual probes lately, else ""."""
    limit = ratelimit.hit("manual-probe", str(request.user.pk), settings.SPECTATOR_MANUAL_PROBES_PER_USER,
                          settings.SPECTATOR_MANUAL_PROBE_WINDOW_SECONDS)
    if not limit.exceeded:
        return ""
    wait_min = limit.retry_after_s // 60 + 1
    return f"Too many manual probes ({limit.limit} allowed per window). Try again in {wait_min} min."


@require_POST
def probe_now(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id, CAN_PROBE)
    limited = manual_probe_limit(request)  # issue 8: a rate limit per user (dashboard/ratelimit.py)
    if limited:
        messages.error(request, limited)
        return redirect("dashboard-server", server_id=server.pk)
    run = queue_manual_probe(server, request.user)
    if run is None:
        messages.warning(request, f"A manual probe of {server.name} is already queued or running.")
    else:
        messages.success(request, f"Probe #{run.pk} of {server.name} queued.")
    return redirect("dashboard-server", server_id=server.pk)
