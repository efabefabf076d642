"""A server that fails N probe runs in a row gets one "unreachable" alert, not one per attempt."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.alerts import after_probe_run
from collectors.models import Alert, ProbeRun
from collectors.probing import ProbeFailed, run_probe_for_server
from tests.collectors.detection_helpers import Enqueued, stored_run

pytestmark = pytest.mark.django_db

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback


def failed(server: Any) -> ProbeRun:
    return stored_run(server, 0.0, status=ProbeRun.Status.FAILED, error="connect failed")


def test_it_opens_one_unreachable_alert_after_three_failed_runs(make_server: Any) -> None:
    server = make_server()
    stored_run(server, 100.0)
    opened = [after_probe_run(failed(server), enqueue=Enqueued()).opened for _ in range(6)]
    assert [len(o) for o in opened] == [0, 0, 1, 0, 0, 0]
    alert = opened[2][0]
    assert alert.kind == Alert.Kind.UNREACHABLE and "connect failed" in alert.note
    assert alert.confirming_runs.count() == 3
    assert Alert.objects.count() == 1


def test_it_resolves_unreachable_when_a_probe_succeeds(make_server: Any) -> None:
    server = make_server()
    for _ in range(3):
        after_probe_run(failed(server), enqueue=Enqueued())
    alert = Alert.objects.get(kind=Alert.Kind.UNREACHABLE)
    assert after_probe_run(stored_run(server, 100.0), enqueue=Enqueued()).resolved == [alert]


def test_it_counts_only_consecutive_failures(make_server: Any) -> None:
    server = make_server()
    for status in ("failed", "failed", "succeeded", "failed", "failed"):
        run = failed(server) if status == "failed" else stored_run(server, 100.0)
        after_probe_run(run, enqueue=Enqueued())
    assert not Alert.objects.exists()


def test_it_opens_unreachable_through_real_probe_runs(make_server: Any) -> None:
    server = make_server(url=UNREACHABLE, probe_plan={"contexts": [64], "outputs": [], "n1": 16, "n2": 64})
    for _ in range(4):
        with pytest.raises(ProbeFailed):
            run_probe_for_server(server.pk, ProbeRun.Trigger.SCHEDULED)
    [alert] = Alert.objects.all()
    assert alert.kind == Alert.Kind.UNREACHABLE and alert.state == Alert.State.OPEN
