"""The scrape task feeds τ from real /metrics windows of the bundled engine into detection."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from collectors import alerts_metrics
from collectors.alerts import AlertParams
from collectors.alerts_metrics import after_scrape, scrape_points
from collectors.models import Scrape
from collectors.tasks import scrape

pytestmark = pytest.mark.django_db


def test_each_scrape_window_with_traffic_is_a_tau_point(
    engine: Any, make_server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SPECTATOR_DETECT_SCRAPE_MIN_STEPS = 5
    evaluated: list[Any] = []  # a spy that calls through: which scrapes the task handed to detection

    def spy(done: Scrape) -> Any:
        evaluated.append(done.pk)
        return after_scrape(done)

    monkeypatch.setattr(alerts_metrics, "after_scrape", spy)
    server = make_server("tiny", engine.url, kind="ddtree")
    scrape.run(server.pk)  # the first scrape: totals only, no window yet
    for _ in range(2):
        body = {"prompt": "def parse(line):\n", "max_tokens": 48, "temperature": 0, "ignore_eos": True}
        httpx.post(engine.url + "/v1/completions", json=body, timeout=60).raise_for_status()
        scrape.run(server.pk)  # the task body: scrape, then detection on the window
    scrape.run(server.pk)  # no traffic in this window: no point
    windows = list(Scrape.objects.filter(server=server, ok=True).order_by("at"))
    assert len(windows) == 4 and windows[3].steps == 0
    assert evaluated == [w.pk for w in windows]
    points = scrape_points(server, windows[-1], AlertParams(scrape_min_steps=5))
    assert [p.value for p in points] == [windows[1].tau, windows[2].tau]
    assert all(1.0 < p.value <= 1 + 16 for p in points)  # accepted tokens per verify step, bonus included
