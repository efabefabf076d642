"""/health: the one page that needs no login (load balancers, `make run`'s wait)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@login_not_required
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """200 when the database answers, 503 otherwise (for load balancers and `make run`'s wait)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any database failure means "not ready"
        return JsonResponse({"status": "error", "database": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})
