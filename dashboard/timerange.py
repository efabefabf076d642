"""The time-range picker: ?range=6h|24h|7d|30d → the start of the window every chart query filters on.

No downsampling yet: a 30-day window reads every probe run and scrape in it (capped by the queries).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.http import HttpRequest
from django.utils import timezone

RANGES: dict[str, timedelta] = {
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_RANGE = "24h"


@dataclass(frozen=True)
class TimeRange:
    key: str
    since: datetime

    @property
    def choices(self) -> list[str]:
        return list(RANGES)


def time_range(request: HttpRequest) -> TimeRange:
    # An unknown value falls back to the default rather than failing: the links are ours.
    key = request.GET.get("range", DEFAULT_RANGE)
    if key not in RANGES:
        key = DEFAULT_RANGE
    return TimeRange(key, timezone.now() - RANGES[key])
