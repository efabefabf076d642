"""The whole loop in real headless Chromium: a live Django test server, a real Celery worker and the tiny
bundled engine. Log in, see the fleet and server charts drawn with the stored data, click "Run probe now",
watch the status reach done, and see the run count grow and the new point appear in the charts with no
reload (the live fragments). Leaves a screenshot of the server page under var/screenshots/.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.collectors.live import SMALL_PLAN
from tests.dashboard.browser import SCREENSHOTS, log_in, needs_chromium, plotted, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def _status(browser: Any) -> tuple[str | None, str, str | None]:
    # One script call: htmx swaps these elements every few seconds, so a found element can go stale.
    return tuple(browser.execute_script(
        "const el = document.getElementById('probe-status');"
        "const st = document.getElementById('server-status');"
        "return [el ? el.dataset.status : null, el ? el.innerText : '', st ? st.dataset.runs : null];"))


def _decode_points(browser: Any) -> list[float]:
    traces = plotted(browser, "#chart-decode_time") or []
    return [y for t in traces if (t["name"] or "").startswith("ctx 64") for y in t["y"]]


def test_it_follows_a_real_probe_live(
    live_server: Any, browser: Any, engine: Any, workers: Any, operator: Any, make_server: Any, store_run: Any
) -> None:
    server = make_server("tiny", engine.url, kind="ddtree", probe_plan=SMALL_PLAN, scrape_interval_s=5)
    for hours, value in ((5, 700.0), (3, 710.0)):
        store_run(server, {64: value, 256: value - 50}, hours_ago=hours)
    workers.start("w1")

    # The fleet: the server's row, with its trend line drawn from the two stored runs.
    log_in(browser, live_server.url, "dave", "dave-password", "/")
    trend = wait_until(browser, lambda b: plotted(b, f"[data-figure=trend-{server.pk}]"))
    assert trend[0]["y"] == [650.0, 660.0]  # decode tok/s at the largest context, 256
    first_refresh = browser.execute_script("return document.getElementById('refreshed-at').dateTime;")
    wait_until(browser, lambda b: b.execute_script(
        "return document.getElementById('refreshed-at').dateTime;") != first_refresh, 30)  # it refreshes itself

    browser.get(f"{live_server.url}/servers/{server.pk}/?range=6h")
    throughput = wait_until(browser, lambda b: plotted(b, "#chart-throughput"))
    assert [t["y"] for t in throughput[1:]] == [[700.0, 650.0], [710.0, 660.0]]  # after the baseline band
    assert _decode_points(browser) == [700.0, 710.0]
    assert _status(browser)[2] == "2"

    browser.execute_script("window.__same_page = true;")  # gone if anything reloads the page from here on
    browser.find_element("xpath", "//button[text()='Run probe now']").click()
    wait_until(browser, lambda b: _status(b)[0] in ("queued", "running", "succeeded"))
    browser.execute_script("window.__same_page = true;")  # the POST redirected back: mark the new page
    done = wait_until(browser, lambda b: _status(b)[0] in ("succeeded", "failed", "skipped") and _status(b), 180)
    assert done[0] == "succeeded", (done[1], workers.logs())
    assert "decode tok/s at 64:" in done[1]

    run = server.probe_runs.get(trigger="manual")
    new_value = run.summary["decode_by_context"]["64"]["median"]
    # The live fragment brings the third run: the count grows and the chart gains the new point.
    wait_until(browser, lambda b: _status(b)[2] == "3", 30)
    wait_until(browser, lambda b: _decode_points(b) == [700.0, 710.0, new_value], 30)
    assert browser.execute_script("return window.__same_page === true;")
    tau = plotted(browser, "#chart-tau")
    assert run.tau_counters in next(t for t in tau if t["name"] == "probes")["y"]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "server-page.png"))
