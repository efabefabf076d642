"""What the server charts draw beyond the data: the budget next to every acceptance rate, per-position
acceptance, change points and fingerprint changes on decode tok/s over time, honest (zero-based) axes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.dashboard.pages import figure, scrape, traces

pytestmark = pytest.mark.django_db


def _with_budget(run: Any, budget: int, rate: float, per_position: dict[str, float] | None = None) -> Any:
    run.fingerprint = {**run.fingerprint, "speculative": {"algorithm": "ddtree", "budget": budget},
                       "hash": f"fp-{budget}"}
    run.acceptance = {"acceptance_rate": rate, "per_position_rate": per_position or {}}
    run.save()
    return run


def test_it_labels_acceptance_rates_with_their_budget(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    server = make_server()
    _with_budget(store_run(server, {64: 100.0}, hours_ago=5), 32, 0.09)
    _with_budget(store_run(server, {64: 100.0}, hours_ago=3), 64, 0.05, {"1": 0.8, "2": 0.55, "3": 0.3})
    # Scrape windows with counter totals: the per-position rate is Δaccepted at k / Δsteps over the range.
    totals = {"kind": "ddtree", "taken_at": 0.0, "steps": 100.0, "per_position": {"1": 70.0, "2": 40.0}}
    scrape(server, 30, totals=totals)
    scrape(server, 1, acceptance_rate=0.04,
           totals={**totals, "taken_at": 1740.0, "steps": 300.0, "per_position": {"1": 230.0, "2": 120.0}})
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/").content.decode()

    rate = figure(page, "fig-acceptance")
    assert "B=64" in rate["layout"]["title"]["text"]
    assert set(traces(page, "fig-acceptance")) == {"scrapes (B=64)", "probes (B=32)", "probes (B=64)"}
    vs_budget = traces(page, "fig-acceptance_budget")
    assert vs_budget["probes"]["x"] == [32, 64] and vs_budget["probes"]["y"] == [0.09, 0.05]
    assert vs_budget["scrapes, this range (B=64)"]["x"] == [64]
    per_pos = traces(page, "fig-per_position")
    assert "B=64" in figure(page, "fig-per_position")["layout"]["title"]["text"]
    assert per_pos["scrapes, this range (B=64)"]["x"] == [1, 2]
    assert per_pos["scrapes, this range (B=64)"]["y"] == [0.8, 0.4]  # 160/200 and 80/200
    assert per_pos[next(n for n in per_pos if n.startswith("latest probe"))]["y"] == [0.8, 0.55, 0.3]


def test_it_marks_change_points_and_fingerprint_changes(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    from collectors.models import ChangePoint

    server = make_server()
    store_run(server, {1024: 115.0}, hours_ago=6)
    upgraded = store_run(server, {1024: 100.0}, hours_ago=4)
    upgraded.fingerprint = {**upgraded.fingerprint, "version": "0.2.0", "hash": "ffff0000"}
    upgraded.save()
    ChangePoint.objects.create(server=server, quantity="decode_tps", context=1024, run=upgraded,
                               at=upgraded.finished_at, index=1, old_level=115.0, old_spread=1.0, new_level=100.0,
                               new_spread=1.0, rel_change=-0.13, p_value=0.001, direction="regression")
    ChangePoint.objects.create(server=server, quantity="decode_tps", context=1024, index=0, old_level=1, new_level=1,
                               at=timezone.now() - timedelta(days=3), old_spread=0, new_spread=0, rel_change=0.1,
                               p_value=0.01, direction="improvement")  # outside the 24 h range: not drawn
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/").content.decode()
    fig = figure(page, "fig-decode_time")
    marks = {t["name"]: t for t in fig["data"]}
    assert marks["change point"]["hovertext"] == [
        "regression at ctx 1024: 115.0 → 100.0 tok/s (-13.0%, p=0.001)"]
    assert marks["fingerprint change"]["hovertext"] == [
        "ddtree · qwen3-tiny · 0.1.0 · #abcdef12 → ddtree · qwen3-tiny · 0.2.0 · #ffff0000"]
    assert len([s for s in fig["layout"]["shapes"] if s["type"] == "line"]) == 2  # two vertical lines


def test_it_starts_throughput_axes_at_zero(client: Any, viewer: Any, make_server: Any, store_run: Any) -> None:
    server = make_server()
    store_run(server, {64: 154.0, 1024: 151.0}, hours_ago=2)  # a 2 % wobble must not look like a cliff
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/").content.decode()
    for key in ("throughput", "decode_time", "sweep", "streaming", "tau"):
        assert figure(page, f"fig-{key}")["layout"]["yaxis"]["rangemode"] == "tozero", key


def test_it_draws_tau_and_acceptance_rate_against_context(
    client: Any, viewer: Any, make_server: Any, store_run: Any
) -> None:
    from collectors.models import ProbeMeasurement

    server = make_server()
    run = _with_budget(store_run(server, {64: 100.0, 1024: 90.0}), 32, 0.05)
    for context, taus in ((64, [4.2, 4.0, 4.4]), (1024, [2.6, 2.5])):
        ProbeMeasurement.objects.filter(run=run, kind="two_point", context=context).delete()
        ProbeMeasurement.objects.bulk_create(ProbeMeasurement(run=run, kind="two_point", context=context, repeat=i,
                                                              decode_tps=100.0, tau_response=t)
                                             for i, t in enumerate(taus))
    client.force_login(viewer)
    page = client.get(f"/servers/{server.pk}/").content.decode()

    drawn = traces(page, "fig-acceptance_context")
    assert drawn["τ"]["x"] == [64, 1024] and drawn["τ"]["y"] == [4.2, 2.55]  # medians per context
    rate = drawn["acceptance rate (τ − 1) / B, B=32"]
    assert rate["y"] == pytest.approx([3.2 / 32, 1.55 / 32])
    assert "B=32" in figure(page, "fig-acceptance_context")["layout"]["yaxis2"]["title"]["text"]
