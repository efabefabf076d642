from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _figure(page: str, fig_id: str) -> dict[str, Any]:
    """The figure JSON a page embedded for plotly.js (json_script), parsed back."""
    tag = f'<script id="{fig_id}" type="application/json">'
    start = page.index(tag) + len(tag)
    return json.loads(page[start:page.index("</script>", start)])


def _scrape(server: Any, minutes_ago: float, **fields: Any) -> Any:
    from collectors.models import Scrape

    defaults = {"tau": 3.1, "acceptance_rate": 0.7, "running": 2.0, "waiting": 1.0, "generation_tokens": 600.0,
                "window_s": 30.0, "kv_usage": 0.4}
    return Scrape.objects.create(server=server, at=timezone.now() - timedelta(minutes=minutes_ago),
                                 **{**defaults, **fields})


def test_it_draws_the_server_charts_from_the_stored_runs(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    server = make_server()
    store_run(server, {64: 120.0, 1024: 110.0}, hours_ago=3)
    latest = store_run(server, {64: 118.0, 1024: 100.0}, hours_ago=1)
    _scrape(server, 5)
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/").content.decode()
    for key in ("throughput", "decode_time", "tau", "sweep", "streaming", "live"):
        assert f'id="chart-{key}"' in page
    band, *throughput = _figure(page, "fig-throughput")["data"]
    assert band["name"].startswith("baseline") and band["y"] == [120.0, 110.0, 110.0, 120.0]
    assert [t["y"] for t in throughput] == [[120.0, 110.0], [118.0, 100.0]]
    assert throughput[-1]["line"]["width"] == 3 and throughput[0]["line"]["width"] == 1  # latest bold
    assert "qwen3-tiny" in throughput[-1]["hovertext"][0]
    decode_time = {t["name"]: t["y"] for t in _figure(page, "fig-decode_time")["data"]}
    assert decode_time == {"ctx 64": [120.0, 118.0], "ctx 1024": [110.0, 100.0]}
    tau = {t["name"]: t["y"] for t in _figure(page, "fig-tau")["data"]}
    assert tau == {"scrapes (live traffic)": [3.1], "probes": [3.2, 3.2]}
    streaming = {t["name"]: t["y"] for t in _figure(page, "fig-streaming")["data"]}
    assert streaming == {"non-streaming (two-point)": [118.0], "streaming": [97.5]}
    live = {t["name"]: t["y"] for t in _figure(page, "fig-live")["data"]}
    assert live["generation tok/s"] == [20.0] and live["KV usage %"] == [40.0]
    assert f'href="/runs/{latest.pk}/"' in page  # the history table


def test_it_filters_the_charts_by_the_time_range(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server()
    store_run(server, {64: 50.0}, hours_ago=48)
    store_run(server, {64: 120.0}, hours_ago=1)
    client.force_login(viewer)
    day = _figure(client.get(f"/servers/{server.pk}/?range=24h").content.decode(), "fig-decode_time")
    week = _figure(client.get(f"/servers/{server.pk}/?range=7d").content.decode(), "fig-decode_time")
    assert day["data"][0]["y"] == [120.0]
    assert week["data"][0]["y"] == [50.0, 120.0]


def test_it_lists_every_server_on_the_fleet_page(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    up, down = make_server("up-box"), make_server("down-box", url="http://127.0.0.1:10")
    store_run(up, {64: 120.0, 1024: 101.5})
    _scrape(up, 0.5)
    _scrape(down, 0.5, ok=False, error="connection refused")
    client.force_login(viewer)
    page = client.get("/").content.decode()
    assert "up-box" in page and "down-box" in page
    assert 'status-up">up' in page and 'status-down">down' in page
    assert "<strong>101.5</strong>" in page and "3.10" in page  # decode at 1024, τ from the scrape
    assert _figure(page, f"trend-{up.pk}")["data"][0]["y"] == [101.5]


def test_it_shows_every_measurement_of_a_probe_run(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server()
    store_run(server, {64: 100.0}, hours_ago=3)
    run = store_run(server, {64: 90.0}, hours_ago=1, contaminated=True, contamination_reason="2 requests running")
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("<td>two_point</td>") == 1 and page.count("<td>stream</td>") == 1
    assert "2 requests running" in page and "qwen3-tiny" in page and "&#x27;running&#x27;: 0.0" in page
    assert "decode tok/s at 64: 90.0, baseline 100.0 ± 0.0, −10.0 %" in page


def test_it_renders_a_hostile_model_name_as_text(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server("<script>alert(1)</script>")
    run = store_run(server, {64: 100.0})
    run.fingerprint = {"kind": "vllm", "model": "<script>alert(2)</script>"}
    run.save()
    client.force_login(viewer)
    for url in ("/", f"/servers/{server.pk}/", f"/runs/{run.pk}/", f"/servers/{server.pk}/live/", "/fleet/rows/"):
        page = client.get(url).content.decode()
        assert "<script>alert" not in page, url
    assert "\\u003Cscript\\u003Ealert(2)" in client.get(f"/servers/{server.pk}/").content.decode()
