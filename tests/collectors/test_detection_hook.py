"""Detection runs at the end of a probe run and never fails it."""

from __future__ import annotations

from typing import Any

import pytest

from collectors import alerts
from collectors.models import ProbeRun
from collectors.probing import detect_after_run
from tests.collectors.detection_helpers import stored_run

pytestmark = pytest.mark.django_db


def test_it_keeps_a_detection_error_on_the_run_instead_of_raising(
    make_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(run: ProbeRun, **kwargs: Any) -> None:
        raise ValueError("bad series")

    monkeypatch.setattr(alerts, "after_probe_run", broken)
    run = stored_run(make_server(), 100.0)
    detect_after_run(run)
    run.refresh_from_db()
    assert run.status == ProbeRun.Status.SUCCEEDED
    assert run.detection_error == "ValueError: bad series"
    assert "detection after probe run" in caplog.text
