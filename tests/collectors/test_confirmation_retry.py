"""A confirmation re-probe that fails transiently is retried as a confirmation of the same suspect run."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import Retry

from collectors.models import ProbeRun
from collectors.tasks import probe
from tests.collectors.detection_helpers import stored_run

pytestmark = pytest.mark.django_db

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback


def test_it_moves_the_suspect_link_to_the_retry_run(
    make_server: Any, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    monkeypatch.setattr(probe, "apply_async", lambda *args, **kwargs: None)  # Task.retry publishes here
    server = make_server(url=UNREACHABLE, probe_plan={"contexts": [64], "outputs": [], "n1": 16, "n2": 64})
    suspect = stored_run(server, 90.0)
    confirmation = ProbeRun.objects.create(
        server=server, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect, plan=suspect.plan
    )
    probe.push_request(retries=0, called_directly=False)
    request.addfinalizer(probe.pop_request)

    with pytest.raises(Retry):
        probe.run(server.pk, "confirmation", confirmation.pk)

    confirmation.refresh_from_db()
    assert confirmation.status == "failed" and confirmation.confirms is None
    retry_run = ProbeRun.objects.get(confirms=suspect)
    assert (retry_run.status, retry_run.trigger) == ("queued", "confirmation")
