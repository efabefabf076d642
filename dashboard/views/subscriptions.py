"""Subscribing to a server's alert e-mails: any reader for themself; staff also add plain addresses."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from collectors.models import Subscription
from dashboard.roles import CAN_ADD_ADDRESSES
from dashboard.views.access import get_server_for_user


@require_POST
def toggle(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id)
    deleted, _ = Subscription.objects.filter(server=server, user=request.user).delete()
    if deleted:
        messages.success(request, f"You no longer receive alert e-mails for {server.name}.")
    else:
        Subscription.objects.get_or_create(server=server, user=request.user, defaults={"added_by": request.user})
        messages.success(request, f"You will receive alert e-mails for {server.name}.")
    return redirect("dashboard-alerts")


@require_POST
def add_address(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id, CAN_ADD_ADDRESSES)
    address = request.POST.get("email", "").strip().lower()
    try:
        validate_email(address)
    except ValidationError:
        messages.error(request, f"{address!r} is not an e-mail address.")
        return redirect("dashboard-alerts")
    Subscription.objects.get_or_create(server=server, email=address, defaults={"added_by": request.user})
    messages.success(request, f"{address} will receive alert e-mails for {server.name}.")
    return redirect("dashboard-alerts")


@require_POST
def remove_address(request: HttpRequest, subscription_id: int) -> HttpResponse:
    if not request.user.has_perm(CAN_ADD_ADDRESSES):
        raise PermissionDenied
    sub = get_object_or_404(Subscription, pk=subscription_id, user=None)
    sub.delete()
    messages.success(request, f"{sub.email} removed.")
    return redirect("dashboard-alerts")
