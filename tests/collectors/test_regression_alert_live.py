"""A real regression on the bundled engine: suspect → confirmation run through a worker → alert → resolve.

The tiny engine on CPU, probed for real. The "regression" is the same server reconfigured to plain
autoregressive decoding (`--algorithm ar`): no drafts accepted, so τ falls to 1.
"""

from __future__ import annotations

from typing import Any

import pytest

from collectors.models import Alert, ProbeRun
from collectors.probing import run_probe_for_server
from tests.collectors.live import SMALL_PLAN
from tests.engine.server.helpers import start_server, stop_server, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = (ProbeRun.Status.SUCCEEDED, ProbeRun.Status.FAILED, ProbeRun.Status.SKIPPED)


def probe_now(server: Any) -> ProbeRun:
    run = run_probe_for_server(server.pk, ProbeRun.Trigger.SCHEDULED)
    assert run.status == ProbeRun.Status.SUCCEEDED, run.error
    assert not run.detection_error
    return run


def open_alerts(server: Any, n: int) -> dict[str, Alert] | None:
    found = {a.kind: a for a in Alert.objects.filter(server=server, state=Alert.State.OPEN)}
    return found if len(found) == n else None


def test_it_confirms_a_real_regression_then_resolves_it(engine: Any, workers: Any, make_server: Any) -> None:
    server = make_server("tiny", engine.url, kind="ddtree", probe_plan=SMALL_PLAN, scrape_interval_s=3600)
    baseline = [probe_now(server) for _ in range(5)]
    assert all(r.tau_counters > 1.3 for r in baseline)
    assert not ProbeRun.objects.filter(trigger=ProbeRun.Trigger.CONFIRMATION).exists()

    workers.start("w1")
    plain = start_server("--algorithm", "ar", "--draft", "none")
    try:
        # The same server, reconfigured without speculation.
        server.base_url = plain.url
        server.save(update_fields=["base_url"])
        suspect = probe_now(server)
        assert suspect.tau_counters == pytest.approx(1.0)
        assert not Alert.objects.exists()  # a suspect alone never alerts
        confirmation = ProbeRun.objects.get(confirms=suspect)
        assert confirmation.trigger == ProbeRun.Trigger.CONFIRMATION
        done = wait_for(lambda: ProbeRun.objects.filter(pk=confirmation.pk, status__in=FINAL).first(), 120,
                        "the worker to run the confirmation")
        assert done.status == ProbeRun.Status.SUCCEEDED, (done.error, workers.logs())
        # The worker evaluates the confirmation run after marking it succeeded: wait for both alerts.
        alerts = wait_for(lambda: open_alerts(server, 2), 30, "two open alerts")
    finally:
        stop_server(plain)

    regression = alerts[Alert.Kind.ACCEPTANCE_REGRESSION]
    assert regression.quantity == "tau"
    assert regression.old_level == pytest.approx(sorted(r.tau_counters for r in baseline)[2])
    assert regression.new_level == pytest.approx(1.0)
    assert set(regression.confirming_runs.all()) == {suspect, confirmation}
    assert Alert.Kind.SPECULATION_NOT_PAYING in alerts
    assert ProbeRun.objects.filter(trigger=ProbeRun.Trigger.CONFIRMATION).count() == 1

    # Restored: runs back at baseline resolve both by themselves (two in a row are needed; the tiny
    # engine's τ wanders by several per cent between salted prompts, so allow up to eight runs).
    server.base_url = engine.url
    server.save(update_fields=["base_url"])
    for _ in range(8):
        probe_now(server)
        if open_alerts(server, 0) is not None:
            break
    states = dict(Alert.objects.filter(server=server).values_list("kind", "state"))
    assert states == {
        Alert.Kind.ACCEPTANCE_REGRESSION: Alert.State.RESOLVED, Alert.Kind.SPECULATION_NOT_PAYING: Alert.State.RESOLVED
    }
