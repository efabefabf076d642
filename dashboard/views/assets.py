"""plotly.js and htmx, served from the installed, pinned Python packages: no CDN (offline deployments)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import django_htmx
import plotly
from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404, HttpRequest
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

FILES = {
    "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
    "htmx.min.js": Path(django_htmx.__file__).parent / "static" / "django_htmx" / "htmx-2.min.js",
}
VERSIONS = {"plotly.min.js": version("plotly"), "htmx.min.js": version("django-htmx")}


# Public: the login page shares the base template; they are the packages' own files, nothing secret.
# Cached for a day: the URL carries the pinned package version, so an upgrade changes it.
@login_not_required
@require_GET
@cache_control(public=True, max_age=86400)
def asset(request: HttpRequest, name: str, version: str) -> FileResponse:
    if name not in FILES:
        raise Http404(name)
    return FileResponse(FILES[name].open("rb"), content_type="text/javascript")


def asset_urls(request: HttpRequest) -> dict[str, dict[str, str]]:
    """Context processor: {{ assets.plotly }} and {{ assets.htmx }}, versioned URLs."""
    from django.urls import reverse

    return {"assets": {
        key: reverse("dashboard-asset", kwargs={"version": VERSIONS[name], "name": name})
        for key, name in (("plotly", "plotly.min.js"), ("htmx", "htmx.min.js"))
    }}
