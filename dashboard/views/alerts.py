"""The alerts page (open, acknowledged, history) and its POST actions (STYLE 3: do, flash, redirect)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from collectors.alerts import transition
from collectors.models import Alert, Notification, Server, Subscription
from collectors.notify import send_test_email
from dashboard.roles import CAN_ADD_ADDRESSES, CAN_TRIAGE_ALERTS
from dashboard.views.access import require_read

HISTORY_ROWS = 100
# URL action → target state.
ACTIONS = {
    "acknowledge": Alert.State.ACKNOWLEDGED,
    "resolve": Alert.State.RESOLVED,
    "false-positive": Alert.State.FALSE_POSITIVE,
}


def _get_alert_for_user(user: object, alert_id: int, perm: str = CAN_TRIAGE_ALERTS) -> Alert:
    if not user.has_perm(perm):  # type: ignore[attr-defined]
        raise PermissionDenied
    return get_object_or_404(Alert.objects.select_related("server"), pk=alert_id)


@require_GET
def alerts(request: HttpRequest) -> HttpResponse:
    require_read(request.user)
    base = Alert.objects.select_related("server").prefetch_related("events__by")
    servers = list(Server.objects.order_by("name"))
    mine = set(Subscription.objects.filter(user=request.user).values_list("server_id", flat=True))
    return render(request, "dashboard/alerts.html", {
        "open": base.filter(state=Alert.State.OPEN),
        "acknowledged": base.filter(state=Alert.State.ACKNOWLEDGED),
        "history": base.exclude(state__in=Alert.ACTIVE)[:HISTORY_ROWS],
        "servers": [(s, s.pk in mine) for s in servers],
        "addresses": Subscription.objects.filter(user=None).select_related("server").order_by("server__name"),
        "can_triage": request.user.has_perm(CAN_TRIAGE_ALERTS),
        "can_add_addresses": request.user.has_perm(CAN_ADD_ADDRESSES),
    })


@require_POST
def alert_action(request: HttpRequest, alert_id: int, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404
    alert = _get_alert_for_user(request.user, alert_id)
    note = request.POST.get("note", "").strip()[:2000]
    if action == "false-positive" and not note:
        messages.warning(request, "Say why it is a false positive (the note is required).")
    elif transition(alert, ACTIONS[action], by=request.user, note=note):
        messages.success(request, f"Alert #{alert.pk} on {alert.server.name}: {ACTIONS[action].label.lower()}.")
    else:
        messages.warning(request, f"Alert #{alert.pk} is {alert.get_state_display().lower()}: nothing changed.")
    return redirect("dashboard-alerts")


@require_POST
def test_email(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(CAN_TRIAGE_ALERTS):
        raise PermissionDenied
    address = request.user.email  # type: ignore[union-attr]
    if not address:
        messages.warning(request, "Your account has no e-mail address.")
        return redirect("dashboard-alerts")
    notification = send_test_email(address)
    if notification.state == Notification.State.SENT:
        messages.success(request, f"Test e-mail sent to {address}.")
    else:
        messages.error(request, f"Test e-mail to {address} failed: {notification.last_error}")
    return redirect("dashboard-alerts")
