"""In real headless Chromium against the live test server: log in, see the charts drawn, run a probe now
and watch the status fragment change without a reload. The worker is played by the test (it moves the
run queued → running → succeeded), so this checks the page, not Celery; tests/collectors covers the worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.dashboard.browser import needs_chromium, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]
_wait_for = wait_until


def _fragment(browser: Any) -> tuple[str | None, str]:
    # One script call: htmx replaces the element every 2 s, so a found element can go stale before it is read.
    return tuple(browser.execute_script(
        "const el = document.getElementById('probe-status');"
        "return el ? [el.dataset.status, el.innerText] : [null, ''];"))


def test_it_runs_a_probe_from_the_server_page(
    live_server: Any, browser: Any, operator: Any, make_server: Any, store_run: Any, sent_probes: list[Any]
) -> None:
    from selenium.webdriver.common.by import By

    server = make_server()
    for hours, value in ((5, 114.0), (3, 116.0)):
        store_run(server, {64: 130.0, 1024: value}, hours_ago=hours)

    browser.get(f"{live_server.url}/login/?next=/servers/{server.pk}/")
    browser.find_element(By.NAME, "username").send_keys("dave")
    browser.find_element(By.NAME, "password").send_keys("dave-password")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait_for(browser, lambda b: b.current_url.endswith(f"/servers/{server.pk}/"))

    # plotly.js drew the throughput chart: the element holds the two runs' traces with their values.
    traces = _wait_for(browser, lambda b: b.execute_script(
        "const el = document.getElementById('chart-throughput'); return el && el.data && el.data.map(t => t.y);"))
    assert traces[1:] == [[130.0, 114.0], [130.0, 116.0]]  # after the baseline band
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-throughput .main-svg")

    browser.find_element(By.XPATH, "//button[text()='Run probe now']").click()
    _wait_for(browser, lambda b: _fragment(b)[0] == "queued")
    run = server.probe_runs.get(trigger="manual")
    assert sent_probes == [(server.pk, "manual", run.pk)]

    # The test plays the worker; the page must follow by polling, with no reload.
    browser.execute_script("window.__same_page = true;")
    run.status, run.current_step = "running", "two_point ctx=1024 repeat 2/3"
    run.save()
    _wait_for(browser, lambda b: _fragment(b)[0] == "running")
    assert "two_point ctx=1024 repeat 2/3" in _fragment(browser)[1]
    run.status, run.current_step, run.finished_at = "succeeded", "done", timezone.now()
    run.summary = {"decode_by_context": {"1024": {"median": 112.4, "spread": 0.3, "n": 3}}}
    run.save()
    _wait_for(browser, lambda b: _fragment(b)[0] == "succeeded")
    assert "decode tok/s at 1024: 112.4, baseline 115.0" in _fragment(browser)[1]
    assert browser.execute_script("return window.__same_page === true;")
