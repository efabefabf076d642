"""Alert states: open → acknowledged → resolved / false positive; one active alert per series and kind."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from collectors.alerts import after_probe_run, open_alert, transition
from collectors.detection.series import DECODE_TPS, TAU, SeriesKey
from collectors.models import Alert, ChangePoint, Notification
from tests.collectors.detection_helpers import WIGGLE, Enqueued, baseline_runs, stored_run

pytestmark = pytest.mark.django_db

KEY = SeriesKey(DECODE_TPS, 64)


def test_it_records_every_state_change_as_an_event(make_server: Any, alice: Any) -> None:
    alert = open_alert(make_server(), Alert.Kind.THROUGHPUT_REGRESSION, KEY, old_level=100.0, new_level=90.0)
    assert alert is not None
    assert transition(alert, Alert.State.ACKNOWLEDGED, by=alice, note="looking")
    assert transition(alert, Alert.State.RESOLVED, by=alice)
    alert.refresh_from_db()
    assert alert.state == Alert.State.RESOLVED and alert.resolved_at is not None
    assert [(e.from_state, e.to_state, e.by) for e in alert.events.all()] == [
        ("", "open", None), ("open", "acknowledged", alice), ("acknowledged", "resolved", alice)
    ]


def test_it_refuses_a_transition_from_the_wrong_state(make_server: Any) -> None:
    alert = open_alert(make_server(), Alert.Kind.THROUGHPUT_REGRESSION, KEY)
    assert alert is not None
    assert transition(alert, Alert.State.ACKNOWLEDGED)
    assert not transition(Alert.objects.get(pk=alert.pk), Alert.State.ACKNOWLEDGED)  # a second click
    assert alert.events.count() == 2


def test_it_applies_only_one_of_two_racing_transitions(make_server: Any) -> None:
    alert = open_alert(make_server(), Alert.Kind.THROUGHPUT_REGRESSION, KEY)
    assert alert is not None
    stale_copy = Alert.objects.get(pk=alert.pk)  # what a second worker read before the first one wrote
    assert transition(alert, Alert.State.RESOLVED)
    assert not transition(stale_copy, Alert.State.ACKNOWLEDGED)
    assert Alert.objects.get(pk=alert.pk).state == Alert.State.RESOLVED


def test_it_keeps_a_note_when_marked_false_positive(make_server: Any, bob: Any) -> None:
    alert = open_alert(make_server(), Alert.Kind.THROUGHPUT_REGRESSION, KEY)
    assert alert is not None
    assert transition(alert, Alert.State.FALSE_POSITIVE, by=bob, note="noisy neighbour on the host")
    alert.refresh_from_db()
    assert alert.state == Alert.State.FALSE_POSITIVE and alert.note == "noisy neighbour on the host"


def test_it_allows_one_active_alert_per_series_and_kind(make_server: Any) -> None:
    server = make_server()
    first = open_alert(server, Alert.Kind.THROUGHPUT_REGRESSION, KEY)
    assert first is not None
    assert open_alert(server, Alert.Kind.THROUGHPUT_REGRESSION, KEY) is None
    transition(first, Alert.State.ACKNOWLEDGED)
    assert open_alert(server, Alert.Kind.THROUGHPUT_REGRESSION, KEY) is None  # acknowledged is still active
    # Other series, other kinds: independent.
    assert open_alert(server, Alert.Kind.THROUGHPUT_REGRESSION, SeriesKey(DECODE_TPS, 1024)) is not None
    assert open_alert(server, Alert.Kind.ACCEPTANCE_REGRESSION, SeriesKey(TAU)) is not None
    transition(first, Alert.State.RESOLVED)
    assert open_alert(server, Alert.Kind.THROUGHPUT_REGRESSION, KEY) is not None  # a new episode
    assert Alert.objects.filter(server=server, quantity=DECODE_TPS, context=64).count() == 2


def test_it_is_the_database_that_refuses_a_second_active_alert(make_server: Any) -> None:
    server = make_server()
    Alert.objects.create(server=server, kind=Alert.Kind.UNREACHABLE)
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(server=server, kind=Alert.Kind.UNREACHABLE, state=Alert.State.ACKNOWLEDGED)


def open_regression(server: Any) -> Alert:
    enqueued = Enqueued()
    suspect = stored_run(server, 80.0)
    after_probe_run(suspect, enqueue=enqueued)
    enqueued[0][1].delete()
    after_probe_run(stored_run(server, 80.5, trigger="confirmation", confirms=suspect), enqueue=enqueued)
    return Alert.objects.get(server=server, state=Alert.State.OPEN)


def test_it_resolves_by_itself_when_the_series_is_back_at_baseline(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    alert = open_regression(server)
    assert after_probe_run(stored_run(server, 100.3), enqueue=Enqueued()).resolved == []  # one point is not enough
    ev = after_probe_run(stored_run(server, 99.6), enqueue=Enqueued())
    assert ev.resolved == [alert]
    alert.refresh_from_db()
    assert alert.state == Alert.State.RESOLVED
    assert alert.events.last().to_state == "resolved" and alert.events.last().by is None


def test_it_stays_open_while_the_series_stays_low(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    alert = open_regression(server)
    enqueued = Enqueued()
    for tps in (81.0, 79.5, 80.2, 100.0, 80.0):
        assert after_probe_run(stored_run(server, tps), enqueue=enqueued).resolved == []
    assert enqueued == []  # an open alert needs no more confirmation runs
    assert Alert.objects.get(pk=alert.pk).state == Alert.State.OPEN
    assert Alert.objects.filter(server=server).count() == 1


def test_it_stores_a_change_point_once_as_the_history_grows(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server, n=20)
    enqueued = Enqueued()
    for i in range(8):
        after_probe_run(stored_run(server, 70.0 * (1 + (0.004 if i % 2 else -0.004))), enqueue=enqueued)
    [cp] = ChangePoint.objects.filter(server=server, quantity=DECODE_TPS, context=64)
    assert cp.direction == ChangePoint.Direction.REGRESSION
    assert cp.rel_change == pytest.approx(-0.30, abs=0.01)


def test_it_records_an_improvement_without_an_alert(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server, n=20)
    enqueued = Enqueued()
    for _ in range(6):
        after_probe_run(stored_run(server, 130.0), enqueue=enqueued)
    [cp] = ChangePoint.objects.filter(server=server, quantity=DECODE_TPS)
    assert cp.direction == ChangePoint.Direction.IMPROVEMENT
    assert not Alert.objects.exists() and enqueued == []


def test_an_improvement_is_the_new_baseline_for_later_drops(make_server: Any) -> None:
    # A deliberate upgrade from 100 to 130 tok/s: recorded, nobody mailed, and 130 is the new normal,
    # so falling back to 100 afterwards is a regression (against the old baseline it would look fine).
    server = make_server()
    baseline_runs(server, n=20)
    enqueued = Enqueued()
    for i in range(8):
        after_probe_run(stored_run(server, 130.0 * (1 + WIGGLE[i])), enqueue=enqueued)
    assert ChangePoint.objects.get(server=server, quantity=DECODE_TPS).direction == "improvement"
    assert not Notification.objects.exists() and enqueued == []
    ev = after_probe_run(stored_run(server, 100.0), enqueue=enqueued)
    assert [k.quantity for k in ev.suspects] == [DECODE_TPS] and ev.confirmation is not None


def test_it_opens_speculation_not_paying_when_tau_stays_near_one(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    enqueued = Enqueued()
    assert after_probe_run(stored_run(server, 100.0, tau=1.01), enqueue=enqueued).opened == []
    [alert] = after_probe_run(stored_run(server, 100.0, tau=1.0), enqueue=enqueued).opened
    assert alert.kind == Alert.Kind.SPECULATION_NOT_PAYING and alert.quantity == TAU
    assert after_probe_run(stored_run(server, 100.0, tau=1.0), enqueue=enqueued).opened == []
    assert after_probe_run(stored_run(server, 100.0, tau=3.1), enqueue=enqueued).resolved == [alert]


def test_it_opens_a_transport_artefact_alert_from_the_run_flag(make_server: Any) -> None:
    server = make_server()
    [alert] = after_probe_run(stored_run(server, 100.0, flags=["transport_artefact"]), enqueue=Enqueued()).opened
    assert alert.kind == Alert.Kind.TRANSPORT_ARTEFACT
    assert after_probe_run(stored_run(server, 100.0), enqueue=Enqueued()).resolved == [alert]


def test_it_opens_an_alert_from_a_change_point_the_fast_check_missed(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server, n=20, noise=2.0)
    enqueued = Enqueued()
    # −5 % under ±2 % noise: inside the fast check's k·MAD band, but a clear level shift after a few runs.
    opened = [after_probe_run(stored_run(server, 95.0 + 0.2 * (i % 2)), enqueue=enqueued).opened for i in range(8)]
    assert enqueued == []
    assert [len(o) for o in opened] == [0, 0, 0, 1, 0, 0, 0, 0]
    alert = opened[3][0]
    assert alert.kind == Alert.Kind.THROUGHPUT_REGRESSION and alert.change_point is not None
    assert alert.old_level == pytest.approx(100.0, abs=0.3) and alert.rel_change == pytest.approx(-0.05, abs=0.005)
    assert alert.confirming_runs.count() == 4


def test_it_does_not_reopen_a_drop_marked_false_positive(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    alert = open_regression(server)
    transition(alert, Alert.State.FALSE_POSITIVE, note="deliberate: smaller draft budget")
    for _ in range(8):
        assert after_probe_run(stored_run(server, 80.0), enqueue=Enqueued()).opened == []
    assert ChangePoint.objects.filter(server=server, direction="regression").exists()


def test_it_resolves_when_most_of_the_drop_is_gone(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    alert = open_regression(server)  # 100 → about 80
    after_probe_run(stored_run(server, 96.5), enqueue=Enqueued())  # −3.5 %: outside the band, 82 % recovered
    assert after_probe_run(stored_run(server, 97.0), enqueue=Enqueued()).resolved == [alert]


def test_it_does_not_resolve_a_half_recovered_series(make_server: Any) -> None:
    server = make_server()
    baseline_runs(server)
    alert = open_regression(server)
    for _ in range(3):
        assert after_probe_run(stored_run(server, 90.0), enqueue=Enqueued()).resolved == []
    assert Alert.objects.get(pk=alert.pk).state == Alert.State.OPEN
