"""The fast check's suspect → one confirmation re-probe → only a confirmed drop opens an alert."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.alerts import after_probe_run
from collectors.models import Alert, ProbeRun
from tests.collectors.detection_helpers import Enqueued, baseline_runs, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(make_server: Any) -> Any:
    s = make_server()
    baseline_runs(s)
    return s


def confirm(server: Any, suspect: ProbeRun, tps: float) -> ProbeRun:
    """The queued confirmation run, now finished with `tps`."""
    run = ProbeRun.objects.get(confirms=suspect)
    run.delete()
    return stored_run(server, tps, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect)


def test_it_queues_one_confirmation_run_for_a_suspected_drop(server: Any) -> None:
    enqueued = Enqueued()
    suspect = stored_run(server, 90.0)
    ev = after_probe_run(suspect, enqueue=enqueued)
    assert [k.quantity for k in ev.suspects] == ["decode_tps"]
    assert ev.confirmation is not None and ev.confirmation.trigger == ProbeRun.Trigger.CONFIRMATION
    assert ev.confirmation.confirms == suspect and ev.confirmation.status == ProbeRun.Status.QUEUED
    assert enqueued == [(server, ev.confirmation)]
    assert not Alert.objects.exists()  # a suspect alone never alerts


def test_it_does_not_queue_a_second_confirmation_for_the_same_run(server: Any) -> None:
    enqueued = Enqueued()
    suspect = stored_run(server, 90.0)
    after_probe_run(suspect, enqueue=enqueued)
    after_probe_run(suspect, enqueue=enqueued)  # a redelivered evaluation
    assert len(enqueued) == 1
    assert ProbeRun.objects.filter(trigger=ProbeRun.Trigger.CONFIRMATION).count() == 1


def test_it_opens_an_alert_when_the_confirmation_is_also_low(server: Any) -> None:
    enqueued = Enqueued()
    suspect = stored_run(server, 90.0)
    after_probe_run(suspect, enqueue=enqueued)
    confirmation = confirm(server, suspect, 91.0)
    ev = after_probe_run(confirmation, enqueue=enqueued)
    [alert] = ev.opened
    assert alert.kind == Alert.Kind.THROUGHPUT_REGRESSION and alert.state == Alert.State.OPEN
    assert (alert.quantity, alert.context, alert.output_len) == ("decode_tps", 64, 0)
    assert alert.old_level == pytest.approx(100.0, abs=0.6)
    assert alert.new_level == pytest.approx(90.5)
    assert alert.rel_change == pytest.approx(-0.095, abs=0.01)
    assert set(alert.confirming_runs.all()) == {suspect, confirmation}
    assert [(e.from_state, e.to_state) for e in alert.events.all()] == [("", "open")]
    assert len(enqueued) == 1  # the confirmation run never asks for another one


def test_it_opens_nothing_when_the_confirmation_is_back_at_baseline(server: Any) -> None:
    enqueued = Enqueued()
    suspect = stored_run(server, 90.0)
    after_probe_run(suspect, enqueue=enqueued)
    ev = after_probe_run(confirm(server, suspect, 100.2), enqueue=enqueued)
    assert ev.opened == [] and not Alert.objects.exists()


def test_it_does_not_suspect_a_point_within_the_noise(server: Any) -> None:
    enqueued = Enqueued()
    ev = after_probe_run(stored_run(server, 98.5), enqueue=enqueued)
    assert ev.suspects == [] and enqueued == []


def test_it_does_not_suspect_an_improvement(server: Any) -> None:
    enqueued = Enqueued()
    ev = after_probe_run(stored_run(server, 120.0), enqueue=enqueued)
    assert ev.suspects == [] and enqueued == []


def test_it_ignores_contaminated_runs(server: Any) -> None:
    enqueued = Enqueued()
    ev = after_probe_run(stored_run(server, 50.0, contaminated=True), enqueue=enqueued)
    assert ev.suspects == [] and enqueued == []


def test_it_waits_for_enough_history_before_suspecting(make_server: Any) -> None:
    fresh = make_server(name="fresh")
    baseline_runs(fresh, n=3)
    enqueued = Enqueued()
    assert after_probe_run(stored_run(fresh, 50.0), enqueue=enqueued).suspects == []
