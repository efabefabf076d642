"""The probe task's retry decision, tested by pushing a request on the task (not eager mode)."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import Retry

from collectors.models import ProbeRun
from collectors.probing import queue_run
from collectors.tasks import PROBE_MAX_RETRIES, probe

pytestmark = pytest.mark.django_db

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback


@pytest.fixture(autouse=True)
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Messages Task.retry would publish, captured instead of reaching a real broker queue."""
    messages: list[dict[str, Any]] = []
    monkeypatch.setattr(probe, "apply_async", lambda *args, **kwargs: messages.append({"args": args, **kwargs}))
    return messages


@pytest.fixture
def request_with(request: Any) -> Any:
    def push(retries: int) -> None:
        probe.push_request(retries=retries, called_directly=False)
        request.addfinalizer(probe.pop_request)

    return push


def test_it_retries_an_unreachable_server_as_a_new_run(make_server: Any, request_with: Any, sent: list) -> None:
    server = make_server(url=UNREACHABLE, probe_plan={"contexts": [64], "outputs": [], "n1": 16, "n2": 64})
    run = queue_run(server, ProbeRun.Trigger.MANUAL)
    request_with(0)

    with pytest.raises(Retry):
        probe.run(server.pk, "manual", run.pk)

    run.refresh_from_db()
    assert run.status == "failed" and "ConnectError" in run.error
    retry_run = ProbeRun.objects.exclude(pk=run.pk).get()
    assert (retry_run.status, retry_run.trigger) == ("queued", "manual")
    assert len(sent) == 1 and sent[0]["countdown"] == 30  # first backoff step


def test_it_stops_retrying_after_the_last_attempt(make_server: Any, request_with: Any) -> None:
    server = make_server(url=UNREACHABLE)
    run = queue_run(server, ProbeRun.Trigger.SCHEDULED)
    request_with(PROBE_MAX_RETRIES)

    probe.run(server.pk, "scheduled", run.pk)  # no Retry raised

    run.refresh_from_db()
    assert run.status == "failed"
    assert ProbeRun.objects.count() == 1


def test_it_ignores_a_server_deleted_while_queued(make_server: Any, request_with: Any) -> None:
    server = make_server(url=UNREACHABLE)
    server_id = server.pk
    server.delete()
    request_with(0)
    probe.run(server_id, "scheduled", None)
