"""Add and edit a server (staff: collectors.add_server and change_server)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from dashboard.forms import ServerForm
from dashboard.roles import CAN_EDIT_SERVERS
from dashboard.views.access import get_server_for_user


def _save(request: HttpRequest, form: ServerForm, verb: str) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        server = form.save()
        messages.success(request, f"Server {server.name} {verb}.")
        return redirect("dashboard-server", server_id=server.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "dashboard/server_form.html", {"form": form, "verb": verb}, status=status)


@require_http_methods(["GET", "POST"])
def server_add(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perms(CAN_EDIT_SERVERS):
        raise PermissionDenied
    return _save(request, ServerForm(request.POST or None), "added")


@require_http_methods(["GET", "POST"])
def server_edit(request: HttpRequest, server_id: int) -> HttpResponse:
    server = get_server_for_user(request.user, server_id, "collectors.change_server")
    form = ServerForm(request.POST or None, instance=server)
    return _save(request, form, "saved")
