"""/metrics: Spectator's own Prometheus metrics (collectors/telemetry.py), summed over every process.

Access (no login redirect: Prometheus does not follow one): a logged-in staff user, a client address in
SPECTATOR_METRICS_ALLOW_FROM (addresses or networks), or `Authorization: Bearer SPECTATOR_METRICS_TOKEN`.
With none of them configured only staff can read it, so a public site leaks nothing by default.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from collectors.telemetry import ProcessFilesCollector, ScrapeLagCollector
from dashboard import ratelimit


def _allowed(request: HttpRequest) -> bool:
    if request.user.is_authenticated and request.user.is_staff:
        return True
    token = settings.SPECTATOR_METRICS_TOKEN
    auth = request.headers.get("Authorization", "")
    if token and auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(ratelimit.client_ip(request))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.SPECTATOR_METRICS_ALLOW_FROM)


def exposition() -> bytes:
    """Every process's values (SPECTATOR_METRICS_DIR) when set, else this process's; plus the DB gauges."""
    folder = settings.SPECTATOR_METRICS_DIR
    if folder:
        processes = CollectorRegistry()
        processes.register(ProcessFilesCollector(folder))
    else:
        processes = REGISTRY
    database = CollectorRegistry()
    database.register(ScrapeLagCollector())
    return generate_latest(processes) + generate_latest(database)


@login_not_required
@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("Forbidden: /metrics needs a staff login, an allowed address or the bearer token.\n",
                            status=403, content_type="text/plain")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
