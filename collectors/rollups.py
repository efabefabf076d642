"""Scrape windows summed per server and hour (ScrapeRollup), kept current by a beat task.

1. `roll_up()` re-aggregates every complete hour from one hour before the newest rollup (so a scrape that
   landed after the last pass is counted) up to the last complete hour, in day-sized chunks, and upserts
   the rows. Idempotent: running it twice changes nothing.
2. Readers (dashboard/queries.py) take rollups up to the newest hour rolled for a server and raw scrapes
   after it, so the charts are complete even when the task is behind or not running.

`TimeBucket` is the time-bucket expression both use: Postgres `date_bin`, an SQLite equivalent.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DateTimeField, Func, Max, Min, Sum
from django.utils import timezone

from collectors.models import Scrape, ScrapeRollup

HOUR = timedelta(hours=1)
CHUNK = timedelta(days=1)
SETTLE = timedelta(minutes=1)  # an hour counts as complete this long after it ended
# (field on ScrapeRollup, Scrape column): sums and non-null counts of the averaged gauges and ratios.
AVERAGED = (("tau", "tau"), ("rate", "acceptance_rate"), ("running", "running"), ("waiting", "waiting"),
            ("kv", "kv_usage"))


class TimeBucket(Func):
    """The start of the `seconds`-wide bucket a timestamp falls in (UTC, aligned to the epoch)."""

    output_field = DateTimeField()

    def __init__(self, expression: str, seconds: int) -> None:
        super().__init__(expression)
        self.seconds = int(seconds)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"date_bin(INTERVAL '{self.seconds} seconds', {sql}, TIMESTAMPTZ '1970-01-01')", params

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # SQLite (the embedded default) stores "YYYY-MM-DD HH:MM:SS.ffffff" in UTC.
        sql, params = compiler.compile(self.source_expressions[0])
        return (f"datetime((CAST(strftime('%%s', {sql}) AS INTEGER) / {self.seconds}) * {self.seconds}, "
                f"'unixepoch')"), params


def scrape_sums() -> dict[str, Any]:
    """Aggregates over good scrapes, as ScrapeRollup's fields: the `.annotate(**…)` of a grouped query."""
    sums: dict[str, Any] = {"n": Count("id"), "generation_tokens": Sum("generation_tokens"),
                            "window_s": Sum("window_s")}
    for name, column in AVERAGED:
        sums[f"{name}_sum"] = Sum(column)
        sums[f"{name}_n"] = Count(column)
    return sums


def _floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def roll_up(now: datetime | None = None) -> int:
    """Upsert the rollups of every complete hour not yet rolled (and the hour before); the rows written."""
    end = _floor_hour((now or timezone.now()) - SETTLE)
    newest = ScrapeRollup.objects.aggregate(hour=Max("hour"))["hour"]
    start = newest - HOUR if newest else Scrape.objects.filter(ok=True).aggregate(at=Min("at"))["at"]
    if start is None:
        return 0
    start, written = _floor_hour(start), 0
    fields = ["n", "generation_tokens", "window_s"] + [f"{n}_{s}" for n, _ in AVERAGED for s in ("sum", "n")]
    while start < end:
        stop = min(start + CHUNK, end)
        rows = (Scrape.objects.filter(ok=True, at__gte=start, at__lt=stop)
                .annotate(hour=TimeBucket("at", 3600)).values("server_id", "hour").annotate(**scrape_sums())
                .order_by())
        written += len(ScrapeRollup.objects.bulk_create(
            [ScrapeRollup(**{k: (0.0 if v is None and k.endswith("_sum") else v) for k, v in row.items()})
             for row in rows],
            update_conflicts=True, unique_fields=["server", "hour"], update_fields=fields, batch_size=2000))
        start = stop
    return written
