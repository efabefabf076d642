from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from collectors.models import RawSample, Scrape
from collectors.retention import apply_retention

pytestmark = pytest.mark.django_db


@override_settings(SPECTATOR_RAW_SAMPLE_RETENTION_DAYS=7, SPECTATOR_SCRAPE_RETENTION_DAYS=90)
def test_it_deletes_old_raw_samples_and_older_scrapes_only(make_server: Any) -> None:
    server = make_server()
    now = timezone.now()
    ages = {"fresh": 1, "week_old": 10, "ancient": 100}
    scrapes = {k: Scrape.objects.create(server=server, at=now - timedelta(days=d)) for k, d in ages.items()}
    for scrape in scrapes.values():
        RawSample.objects.bulk_create([RawSample(scrape=scrape, name="x", value=i) for i in range(3)])

    assert apply_retention(now) == {"raw_samples": 6, "scrapes": 1}

    assert set(Scrape.objects.values_list("pk", flat=True)) == {scrapes["fresh"].pk, scrapes["week_old"].pk}
    assert RawSample.objects.filter(scrape=scrapes["fresh"]).count() == 3
    assert RawSample.objects.filter(scrape=scrapes["week_old"]).count() == 0
