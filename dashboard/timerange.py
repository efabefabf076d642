"""The time-range picker: ?range=6h|24h|7d|30d, or ?range=custom&from=…&to=… → the window every chart query
filters on, and the bucket width the database downsamples scrapes to (queries.scrape_buckets).

Buckets are chosen so a chart holds at most about MAX_POINTS points whatever the span: a 30-day window of
15-second scrapes (172 800 rows per server) becomes 360 two-hour buckets, aggregated in the database from
hourly rollups; spans over two days never go below an hour, so they always read the rollups.
A bad custom range (unparseable, from ≥ to, longer than MAX_SPAN) is reported on the page and the default
range is shown instead: the error says what to fix, and the page still answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest
from django.utils import timezone

RANGES: dict[str, timedelta] = {
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_RANGE = "24h"
MAX_SPAN = timedelta(days=92)  # raw scrapes are not kept longer than this (collectors/retention.py)
MAX_POINTS = 400
ROLLUP_FROM = timedelta(days=2)  # spans longer than this use hour-wide (or wider) buckets
# Bucket widths in seconds; the smallest one that keeps the chart under MAX_POINTS points is used.
BUCKETS = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"]


class CustomRangeForm(forms.Form):
    # UTC, like every time on the pages; <input type="datetime-local"> sends "YYYY-MM-DDTHH:MM".
    start = forms.DateTimeField(input_formats=INPUT_FORMATS, error_messages={
        "required": "Give a start time.", "invalid": "Start time: use YYYY-MM-DD HH:MM (UTC)."})
    end = forms.DateTimeField(input_formats=INPUT_FORMATS, error_messages={
        "required": "Give an end time.", "invalid": "End time: use YYYY-MM-DD HH:MM (UTC)."})

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if isinstance(start, datetime) and isinstance(end, datetime):
            if start >= end:
                raise forms.ValidationError("The start of the range must be before its end.")
            if end - start > MAX_SPAN:
                raise forms.ValidationError(f"A range may span at most {MAX_SPAN.days} days.")
        return data


def bucket_seconds(span: timedelta) -> int:
    target = span.total_seconds() / MAX_POINTS
    if span > ROLLUP_FROM:
        target = max(target, 3600)  # hourly or coarser: read from the hourly rollups (collectors/rollups.py)
    return next((b for b in BUCKETS if b >= target), BUCKETS[-1])


@dataclass(frozen=True)
class TimeRange:
    key: str
    since: datetime
    until: datetime
    errors: list[str] = field(default_factory=list)

    @property
    def choices(self) -> list[str]:
        return list(RANGES)

    @property
    def bucket_s(self) -> int:
        return bucket_seconds(self.until - self.since)

    @property
    def is_live(self) -> bool:
        """A window that ends now keeps refreshing; a custom window in the past is history."""
        return self.key != "custom"

    @property
    def query(self) -> str:
        """The query string that selects this window again (for the live fragment's URL)."""
        if self.key != "custom":
            return urlencode({"range": self.key})
        return urlencode({"range": "custom", "start": f"{self.since:%Y-%m-%dT%H:%M}",
                          "end": f"{self.until:%Y-%m-%dT%H:%M}"})


def time_range(request: HttpRequest) -> TimeRange:
    key = request.GET.get("range", DEFAULT_RANGE)
    now = timezone.now()
    if key == "custom":
        form = CustomRangeForm(request.GET)
        if form.is_valid():
            return TimeRange("custom", form.cleaned_data["start"], form.cleaned_data["end"])
        errors = [e for errs in form.errors.values() for e in errs]
        return TimeRange(DEFAULT_RANGE, now - RANGES[DEFAULT_RANGE], now, errors)
    # An unknown preset falls back to the default rather than failing: the links are ours.
    if key not in RANGES:
        key = DEFAULT_RANGE
    return TimeRange(key, now - RANGES[key], now)
