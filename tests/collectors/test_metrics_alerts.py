"""Alerts from /metrics: counters stale while probes run, metric families vanished, τ from scrape windows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from collectors import emails
from collectors.alerts import AlertParams, after_probe_run
from collectors.alerts_metrics import after_scrape
from collectors.detection.metrics_health import counters_moved, read_families, schema_change
from collectors.models import Alert, ChangePoint, ProbeRun, RawSample, Scrape, Server
from collectors.notify import alert_context
from tests.collectors.detection_helpers import WIGGLE, Enqueued, stored_run

FAMILIES = ["ddtree:requests_total", "ddtree:generation_tokens_total", "ddtree:spec_decode_num_drafts_total",
            "ddtree:spec_decode_num_accepted_tokens_total", "process_cpu_seconds_total",
            "ddtree:spec_decode_num_accepted_tokens_per_pos_total", "ddtree:num_requests_running"]


def test_counters_moved() -> None:
    assert counters_moved({"requests": 5, "generation_tokens": 50}, {"requests": 9, "generation_tokens": 90})
    assert counters_moved({"requests": 5, "generation_tokens": 50}, {"requests": 5, "generation_tokens": 50}) is False
    assert counters_moved({"requests": None}, {"requests": None}) is None  # not exported: not a staleness case


def test_schema_change_names_what_vanished_and_what_appeared() -> None:
    assert read_families("ddtree", FAMILIES) == set(FAMILIES[:4])
    renamed = [*FAMILIES[:2], "ddtree:spec_verify_steps_total", *FAMILIES[3:]]
    assert schema_change("ddtree", FAMILIES, renamed) == (
        ["ddtree:spec_decode_num_drafts_total"], ["ddtree:spec_verify_steps_total"])
    # Unread (process_*), labelled (per position: no sample before its first child) or a gauge: fine.
    assert schema_change("ddtree", FAMILIES, FAMILIES[:4]) == ([], [])
    # An exporter that drops the `_total` suffix did not rename anything.
    assert schema_change("ddtree", FAMILIES, [f.removesuffix("_total") for f in FAMILIES]) == ([], [])


def probed(server: Server, *, requests: tuple[float, float], names: list[str] | None = None, minutes: int) -> ProbeRun:
    """A succeeded probe run `minutes` ago with its before/after scrapes (totals and sample names)."""
    start = timezone.now() - timedelta(minutes=minutes)
    run = stored_run(server, 100.0)
    ProbeRun.objects.filter(pk=run.pk).update(queued_at=start, started_at=start,
                                              finished_at=start + timedelta(seconds=10))
    run.refresh_from_db()
    for i, total in enumerate(requests):
        scrape = Scrape.objects.create(server=server, at=start + timedelta(seconds=1 + 8 * i), ok=True, kind="ddtree",
                                       totals={"requests": total, "generation_tokens": total * 10})
        RawSample.objects.bulk_create(RawSample(scrape=scrape, name=n, value=total) for n in (names or FAMILIES))
    return run


@pytest.mark.django_db
def test_counters_standing_still_under_probes_open_one_stale_alert_until_they_move(make_server: Any) -> None:
    server = make_server()
    params = AlertParams(stale_after=2)

    def detect(run: ProbeRun) -> Any:
        return after_probe_run(run, params=params, enqueue=Enqueued())

    assert detect(probed(server, requests=(10, 14), minutes=50)).opened == []
    assert detect(probed(server, requests=(14, 14), minutes=40)).opened == []
    [alert] = detect(probed(server, requests=(14, 14), minutes=30)).opened
    assert alert.kind == Alert.Kind.METRICS_STALE and "did not move" in alert.note
    assert alert.confirming_runs.count() == 2
    detect(probed(server, requests=(14, 14), minutes=20))
    assert Alert.objects.count() == 1  # one alert, not one per run
    assert detect(probed(server, requests=(14, 18), minutes=10)).resolved == [alert]


@pytest.mark.django_db
def test_a_renamed_family_opens_schema_changed_naming_old_and_new(make_server: Any) -> None:
    server = make_server()
    after_probe_run(probed(server, requests=(1, 5), minutes=30), enqueue=Enqueued())
    renamed = [n.replace("num_drafts", "verify_steps") for n in FAMILIES]
    [alert] = after_probe_run(probed(server, requests=(5, 9), names=renamed, minutes=20), enqueue=Enqueued()).opened
    assert alert.kind == Alert.Kind.SCHEMA_CHANGED
    assert alert.fingerprint_before == {"metric_families": ["ddtree:spec_decode_num_drafts_total"]}
    assert alert.fingerprint_after == {"metric_families": ["ddtree:spec_decode_verify_steps_total"]}
    assert "no longer has ddtree:spec_decode_num_drafts_total" in alert.note
    mail = emails.alert_opened("ops@example.org", alert_context(alert.events.get()))
    assert "new: ddtree:spec_decode_verify_steps_total" in mail.body and "fingerprint" not in mail.body
    ev = after_probe_run(probed(server, requests=(9, 13), minutes=10), enqueue=Enqueued())  # rolled back
    assert ev.resolved == [alert]


def window(server: Server, tau: float, minutes: float, steps: float = 100.0) -> Scrape:
    return Scrape.objects.create(server=server, at=timezone.now() - timedelta(minutes=minutes), ok=True,
                                 kind="ddtree", steps=steps, accepted=(tau - 1) * steps, tau=tau)


@pytest.mark.django_db
def test_tau_from_scrape_windows_alerts_on_a_confirmed_drop_and_resolves(make_server: Any) -> None:
    server = make_server()
    minutes = iter(range(100, 0, -1))
    for i in range(12):
        assert after_scrape(window(server, 2.5 * (1 + WIGGLE[i % len(WIGGLE)]), next(minutes))).opened == []
    assert after_scrape(window(server, 1.9, next(minutes), steps=5)).opened == []  # too few steps: no point
    assert after_scrape(window(server, 1.9, next(minutes))).opened == []  # one window is only suspect
    [alert] = after_scrape(window(server, 1.85, next(minutes))).opened
    assert (alert.kind, alert.quantity) == (Alert.Kind.ACCEPTANCE_REGRESSION, "tau_scrape")
    assert alert.old_level == pytest.approx(2.5, rel=0.01) and alert.new_level == pytest.approx(1.875)
    after_scrape(window(server, 1.9, -1))  # windows after the alert opened
    assert ChangePoint.objects.filter(server=server, quantity="tau_scrape", direction="regression").exists()
    assert after_scrape(window(server, 2.5, -2)).resolved == []
    assert after_scrape(window(server, 2.49, -3)).resolved == [alert]


@pytest.mark.django_db
def test_noisy_scrape_windows_stay_silent(make_server: Any) -> None:
    import random

    server = make_server()
    rng = random.Random(7)
    for m in range(200, 0, -1):
        after_scrape(window(server, 2.5 * (1 + rng.gauss(0, 0.02)), m))
    assert not Alert.objects.exists() and not ChangePoint.objects.exists()
