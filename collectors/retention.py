"""Retention: raw samples are bulky (every series, every scrape) and kept for days; the normalised
scrape rows for months; probe runs and measurements forever (they are the history charts read)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from collectors.models import RawSample, Scrape

BATCH = 5000


def _delete_in_batches(queryset, model) -> int:  # type: ignore[no-untyped-def]
    # Batches keep each transaction (and a SQLite write lock) short beside running scrapes.
    total = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return total
        total += model.objects.filter(pk__in=ids).delete()[0]


def apply_retention(now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    raw_cutoff = now - timedelta(days=settings.SPECTATOR_RAW_SAMPLE_RETENTION_DAYS)
    scrape_cutoff = now - timedelta(days=settings.SPECTATOR_SCRAPE_RETENTION_DAYS)
    raw = _delete_in_batches(RawSample.objects.filter(scrape__at__lt=raw_cutoff), RawSample)
    scrapes = _delete_in_batches(Scrape.objects.filter(at__lt=scrape_cutoff), Scrape)
    return {"raw_samples": raw, "scrapes": scrapes}
