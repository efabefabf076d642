"""Issue 6: pure noise (σ = 2 %) opens no alert — through the whole detection (change points, fast check,
confirmation re-probes, backstop), not only the detectors alone, which test_changepoints.py and
test_baseline_check.py run on 200-point series. Here 100 runs per seed: every run re-analyses the
history, so the cost grows with its square."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from collectors.alerts import after_probe_run
from collectors.models import Alert, ProbeRun
from tests.collectors.detection_helpers import Enqueued, stored_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_percent_noise_opens_no_alert(make_server: Any, seed: int) -> None:
    server = make_server()
    rng = np.random.default_rng(seed)
    enqueued = Enqueued()
    suspects = 0
    for tps in 100.0 * (1.0 + 0.02 * rng.standard_normal(100)):
        if enqueued:  # a confirmation was queued: the next noise point is that re-probe
            _, queued = enqueued.pop()
            queued.delete()
            suspect = ProbeRun.objects.filter(server=server).latest("queued_at")
            run = stored_run(server, tps, tau=None, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=suspect)
            suspects += 1
        else:
            run = stored_run(server, tps, tau=None)
        ev = after_probe_run(run, enqueue=enqueued)
        assert not ev.opened, (seed, run.pk, [a.note for a in ev.opened])
    assert not Alert.objects.exists()
    assert suspects <= 5  # each suspect costs one re-probe: rare
