"""The one place that decides who may see or act on a server (STYLE 3: `_get_x_for_user`)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from collectors.models import ProbeRun, Server
from dashboard.roles import CAN_READ

User = AbstractBaseUser | AnonymousUser


def require_read(user: User) -> None:
    # Logged in is not enough: an account outside every role (an outsider) sees nothing.
    if not user.has_perm(CAN_READ):  # type: ignore[union-attr]
        raise PermissionDenied


def get_server_for_user(user: User, server_id: int, perm: str = CAN_READ) -> Server:
    if not user.has_perm(perm):  # type: ignore[union-attr]
        raise PermissionDenied
    return get_object_or_404(Server, pk=server_id)


def get_run_for_user(user: User, run_id: int) -> ProbeRun:
    require_read(user)
    return get_object_or_404(ProbeRun.objects.select_related("server", "requested_by"), pk=run_id)
