"""Helpers for the page tests: the figure JSON a page embedded, and stored scrapes."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone


def figure(page: str, fig_id: str) -> dict[str, Any]:
    """The figure JSON a page embedded for plotly.js (json_script), parsed back."""
    tag = f'<script id="{fig_id}" type="application/json">'
    start = page.index(tag) + len(tag)
    return json.loads(page[start:page.index("</script>", start)])


def traces(page: str, fig_id: str) -> dict[str, Any]:
    return {t.get("name"): t for t in figure(page, fig_id)["data"]}


def scrape(server: Any, minutes_ago: float, **fields: Any) -> Any:
    from collectors.models import Scrape

    defaults = {"tau": 3.1, "acceptance_rate": 0.7, "running": 2.0, "waiting": 1.0, "generation_tokens": 600.0,
                "window_s": 30.0, "kv_usage": 0.4}
    return Scrape.objects.create(server=server, at=timezone.now() - timedelta(minutes=minutes_ago),
                                 **{**defaults, **fields})
