"""Plotly figures built server-side from stored rows; the page hands each to plotly.js as JSON.

Every builder returns plain dicts/lists in plotly.js's figure schema (dashboard/figure.py; datetimes left to
Django's JSON encoder), which templates embed with `json_script`, so server-provided strings are escaped in
the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from collectors.models import ChangePoint, ProbeMeasurement, ProbeRun
from dashboard.figure import Fig, Figure, bar, scatter
from dashboard.queries import (
    Baseline,
    RunPoint,
    ScrapeBucket,
    budget_label,
    budget_value,
    decode_by_context,
    decode_by_output,
    fingerprint_label,
    run_tau,
)

FAINT = "rgba(31, 119, 180, 0.25)"
BOLD = "rgb(31, 119, 180)"
Run = ProbeRun | RunPoint  # a whole row, or the slim one queries.succeeded_runs reads
RECENT_RUNS = 20  # throughput-vs-context draws the latest runs only: 720 faint lines say nothing more


def _layout(fig: Fig, title: str, x: str, y: str, height: int = 320, zero: bool = True) -> Figure:
    """Common look. `zero`: the y axis starts at zero, so a 2 % wobble looks like 2 % and not like a cliff
    (autoscaled axes stretch any wobble to the full height). `uirevision` keeps a user's zoom when the live
    refresh hands plotly.js new data (Plotly.react)."""
    fig.update_layout(title={"text": title, "x": 0.01, "xanchor": "left"}, xaxis={"title": {"text": x}},
                      yaxis={"title": {"text": y}}, height=height, margin={"l": 60, "r": 20, "t": 40, "b": 50},
                      legend={"orientation": "h", "y": -0.25}, uirevision="keep")
    if zero:
        fig.update_yaxes(rangemode="tozero")
    if not fig.has_data():
        # Say so, rather than leave empty axes that read like a broken chart.
        fig.add_annotation(text="no data in this time range", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=0.5, font={"size": 14, "color": "#667"})
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    return fig.to_json()


def throughput_vs_context(runs: list[Run], baseline: dict[int, Baseline] | None = None) -> Figure:
    """One line per run; the latest bold, older faint, over the baseline band (median ± MAD of the clean
    runs before the latest), so a drop stands out against the history."""
    fig = Fig()
    if baseline:
        contexts = sorted(baseline)
        upper = [baseline[c].median + baseline[c].mad for c in contexts]
        lower = [baseline[c].median - baseline[c].mad for c in contexts]
        fig.add_trace(scatter(x=contexts + contexts[::-1], y=upper + lower[::-1], fill="toself",
                              fillcolor="rgba(44, 160, 44, 0.15)", line={"width": 0}, hoverinfo="skip",
                                 name=f"baseline (median ± MAD, {max(b.n for b in baseline.values())} runs)"))
    runs = runs[-RECENT_RUNS:]
    for i, run in enumerate(runs):
        latest = i == len(runs) - 1
        points = decode_by_context(run)
        label = f"run #{run.pk} {run.finished_at:%Y-%m-%d %H:%M} {fingerprint_label(run.fingerprint)}"
        fig.add_trace(scatter(
            x=list(points), y=list(points.values()), mode="lines+markers", name=f"latest (run #{run.pk})" if latest
            else "older runs", showlegend=latest or i == 0, legendgroup="latest" if latest else "older",
            line={"color": BOLD if latest else FAINT, "width": 3 if latest else 1},
            hovertext=[label] * len(points), hoverinfo="x+y+text",
        ))
    return _layout(fig, "Decode throughput vs context", "context (tokens)", "decode tok/s")


def fingerprint_changes(runs: list[Run]) -> list[tuple[Any, str]]:
    """(time, "old → new") wherever a run's fingerprint (version, model, config) differs from the run before."""
    changes = []
    for before, after in zip(runs, runs[1:], strict=False):
        old, new = (r.fingerprint or {} for r in (before, after))
        if old.get("hash") != new.get("hash"):
            changes.append((after.finished_at, f"{fingerprint_label(old) or '?'} → {fingerprint_label(new) or '?'}"))
    return changes


def _mark_events(fig: Fig, events: list[tuple[Any, str, str, str]]) -> None:
    """Vertical lines at (time, kind, hover text, colour), with a marker on top that carries the hover text
    (plotly shapes have no hover of their own)."""
    for kind in dict.fromkeys(kind for _, kind, _, _ in events):
        mine = [e for e in events if e[1] == kind]
        fig.add_trace(scatter(x=[t for t, *_ in mine], y=[1.0] * len(mine), yaxis="y2", mode="markers",
                              name=kind, marker={"symbol": "triangle-down", "size": 11, "color": mine[0][3]},
                                 hovertext=[text for _, _, text, _ in mine], hoverinfo="x+text"))
    for t, _, _, colour in events:
        fig.add_vline(x=t, line={"color": colour, "width": 1, "dash": "dash"})
    fig.update_layout(yaxis2={"overlaying": "y", "range": [0, 1.05], "visible": False, "fixedrange": True})


def decode_over_time(runs: list[Run], change_points: Sequence[ChangePoint] = (),
                     thinned_s: int | None = None) -> Figure:
    """Decode tok/s per context over time, with the detector's change points and fingerprint changes marked.
    `thinned_s`: the runs are one per bucket of that many seconds (queries.run_bucket); the title says so."""
    series: dict[int, tuple[list[Any], list[float]]] = {}
    for run in runs:
        for context, value in decode_by_context(run).items():
            xs, ys = series.setdefault(context, ([], []))
            xs.append(run.finished_at)
            ys.append(value)
    fig = Fig([scatter(x=xs, y=ys, mode="lines+markers", name=f"ctx {c}") for c, (xs, ys) in
              sorted(series.items())])
    events = [(cp.at, "change point", f"{cp.direction} at ctx {cp.context}: {cp.old_level:.1f} → "
               f"{cp.new_level:.1f} tok/s ({cp.rel_change:+.1%}, p={cp.p_value:.1g})",
               "#c62828" if cp.direction == "regression" else "#2e7d32") for cp in change_points]
    events += [(t, "fingerprint change", text, "#6a1b9a") for t, text in fingerprint_changes(runs)]
    if events and series:
        _mark_events(fig, events)
    title = "Decode tok/s over time, per context"
    if thinned_s:
        title += f" (newest run per {thinned_s // 60} min shown)"
    return _layout(fig, title, "time (UTC)", "decode tok/s")


def tau_over_time(runs: list[Run], buckets: list[ScrapeBucket]) -> Figure:
    """τ = accepted tokens per verify step (bonus included), from scrape windows and from probes. τ does not
    depend on how many nodes were drafted, so it is comparable across budgets."""
    fig = Fig()
    windows = [b for b in buckets if b.tau is not None]
    fig.add_trace(scatter(x=[b.at for b in windows], y=[b.tau for b in windows], mode="lines+markers",
                          name="scrapes (live traffic)", line={"width": 1}, marker={"size": 3}))
    probed = [(r.finished_at, run_tau(r)) for r in runs if run_tau(r) is not None]
    fig.add_trace(scatter(x=[t for t, _ in probed], y=[v for _, v in probed], mode="markers", name="probes",
                          marker={"size": 8}))
    return _layout(fig, "τ (accepted tokens per verify step) over time", "time (UTC)", "τ")


def _rate(run: Run) -> float | None:
    value = (run.acceptance or {}).get("acceptance_rate")
    return value if isinstance(value, (int, float)) else None


def acceptance_rate_over_time(runs: list[Run], buckets: list[ScrapeBucket], budget: str) -> Figure:
    """Accepted / drafted: with a tree, "drafted" is the node budget per round, so the rate falls as B grows
    and means nothing without its B. One probe trace per budget; scrapes carry the latest probe's B."""
    fig = Fig()
    windows = [b for b in buckets if b.acceptance_rate is not None]
    fig.add_trace(scatter(x=[b.at for b in windows], y=[b.acceptance_rate for b in windows], mode="lines+markers",
                          name=f"scrapes ({budget or 'budget unknown'})", line={"width": 1}, marker={"size": 3}))
    by_budget: dict[str, list[Run]] = {}
    for run in runs:
        if _rate(run) is not None:
            by_budget.setdefault(budget_label(run.fingerprint) or "budget unknown", []).append(run)
    for label, group in sorted(by_budget.items()):
        fig.add_trace(scatter(x=[r.finished_at for r in group], y=[_rate(r) for r in group], mode="markers",
                              name=f"probes ({label})", marker={"size": 8}))
    return _layout(fig, f"Acceptance rate over time, {budget or 'budget unknown'}", "time (UTC)",
                   "accepted / drafted")


def acceptance_vs_budget(runs: list[Run], buckets: list[ScrapeBucket], budget: int | None) -> Figure:
    """Acceptance rate against the draft budget B the server ran with: every probe at its fingerprint's B,
    and the scrape windows' mean at the latest B."""
    probed = [(budget_value(r.fingerprint), _rate(r), r) for r in runs]
    probed = [(b, v, r) for b, v, r in probed if b is not None and v is not None]
    fig = Fig(scatter(
        x=[b for b, _, _ in probed], y=[v for _, v, _ in probed], mode="markers", name="probes",
        hovertext=[f"run #{r.pk} {r.finished_at:%Y-%m-%d %H:%M}" for _, _, r in probed], hoverinfo="x+y+text"))
    rates = [(b.acceptance_rate, b.n) for b in buckets if b.acceptance_rate is not None]
    if budget is not None and rates:
        mean = sum(v * n for v, n in rates) / sum(n for _, n in rates)
        fig.add_trace(scatter(x=[budget], y=[mean], mode="markers", name=f"scrapes, this range (B={budget})",
                              marker={"symbol": "diamond", "size": 12}))
    fig.update_xaxes(type="log", tickvals=[2 ** k for k in range(11)])  # budgets are powers of two, mostly
    return _layout(fig, "Acceptance rate vs draft budget B", "draft budget B (nodes per round)", "acceptance rate")


def per_position(run: Run | None, scraped: dict[int, float], budget: str) -> Figure:
    """Accepted tokens at draft position k per verify step (≈ the chance the walk reaches depth k), from the
    scrapes over the range and from the latest probe; both depend on the budget, which the title names."""
    fig = Fig()
    if scraped:
        fig.add_trace(scatter(x=list(scraped), y=list(scraped.values()), mode="lines+markers",
                              name=f"scrapes, this range ({budget or 'budget unknown'})"))
    probed = {int(k): v for k, v in ((run.acceptance or {}).get("per_position_rate") or {}).items()} if run else {}
    if probed:
        fig.add_trace(scatter(x=sorted(probed), y=[probed[k] for k in sorted(probed)], mode="markers",
                              name=f"latest probe #{run.pk} ({budget_label(run.fingerprint) or 'budget unknown'})"))
    return _layout(fig, f"Per-position acceptance, {budget or 'budget unknown'}", "draft position",
                   "accepted per verify step")


def acceptance_vs_context(measurements: list[ProbeMeasurement], budget: int | None) -> Figure:
    """The latest run: τ per probed context (median of its two-point requests' response τ), and the acceptance
    rate it implies, (τ − 1) / B (accepted drafted tokens over the B drafted per step), on its own axis and
    only when the server reported B: a long context can cost the drafter its agreement before throughput shows it."""
    by_context: dict[int, list[float]] = {}
    for m in measurements:
        if m.kind == "two_point" and m.tau_response is not None:
            by_context.setdefault(m.context, []).append(m.tau_response)
    contexts = sorted(by_context)
    tau = [float(np.median(by_context[c])) for c in contexts]
    fig = Fig([scatter(x=contexts, y=tau, mode="lines+markers", name="τ")])
    if budget:
        fig.add_trace(scatter(x=contexts, y=[(t - 1) / budget for t in tau], mode="lines+markers", yaxis="y2",
                              name=f"acceptance rate (τ − 1) / B, B={budget}", line={"dash": "dot"}))
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "rangemode": "tozero",
                                  "title": {"text": f"accepted / drafted (B={budget})"}})
    figure = _layout(fig, "τ and acceptance rate vs context (latest run)", "context (tokens)", "τ")
    figure["layout"]["margin"]["r"] = 60  # room for the right axis
    return figure


def output_sweep(runs: list[Run]) -> Figure:
    """Decode tok/s by output length; flat is healthy (a slope means long outputs slow down)."""
    fig = Fig()
    for i, run in enumerate(runs[-10:]):
        latest = i == len(runs[-10:]) - 1
        points = decode_by_output(run)
        fig.add_trace(scatter(x=list(points), y=list(points.values()), mode="lines+markers",
                              name=f"run #{run.pk}", showlegend=latest,
                                 line={"color": BOLD if latest else FAINT, "width": 3 if latest else 1}))
    return _layout(fig, "Output-length sweep (flat is healthy)", "output tokens", "decode tok/s")


def streaming_vs_plain(run: ProbeRun | None, measurements: list[ProbeMeasurement]) -> Figure:
    """The latest run: non-streamed two-point decode tok/s vs streamed tok/s at the contexts streamed."""
    plain = decode_by_context(run) if run else {}
    streamed = {m.context: m.streamed_tps for m in measurements if m.kind == "stream" and m.streamed_tps}
    contexts = sorted(streamed)
    fig = Fig([
        bar(x=[str(c) for c in contexts], y=[plain.get(c) for c in contexts], name="non-streaming (two-point)"),
        bar(x=[str(c) for c in contexts], y=[streamed[c] for c in contexts], name="streaming"),
    ])
    return _layout(fig, "Streaming vs non-streaming (latest run)", "context (tokens)", "tok/s")


def live_panel(buckets: list[ScrapeBucket]) -> Figure:
    """From the scrapes: requests running/waiting, generation throughput, KV-cache usage."""
    fig = Fig()
    at = [b.at for b in buckets]
    fig.add_trace(scatter(x=at, y=[b.running for b in buckets], name="running", mode="lines"))
    fig.add_trace(scatter(x=at, y=[b.waiting for b in buckets], name="waiting", mode="lines"))
    fig.add_trace(scatter(x=at, y=[b.generation_tps for b in buckets], name="generation tok/s", mode="lines",
                          yaxis="y2"))
    fig.add_trace(scatter(x=at, y=[b.kv_usage * 100 if b.kv_usage is not None else None for b in buckets],
                          name="KV usage %", mode="lines", line={"dash": "dot"}))
    fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": {"text": "generation tok/s"},
                              "rangemode": "tozero"})
    figure = _layout(fig, "Live (from /metrics scrapes)", "time (UTC)", "requests / KV %")
    figure["layout"]["margin"]["r"] = 60  # room for the right axis
    return figure


def sparkline(runs: list[Run]) -> Figure:
    """The fleet's small trend: decode tok/s at each run's largest probed context."""
    points = [(r.finished_at, decode_by_context(r)) for r in runs]
    points = [(t, d[max(d)]) for t, d in points if d]
    fig = Fig(scatter(x=[t for t, _ in points], y=[v for _, v in points], mode="lines",
              line={"width": 1.5, "color": BOLD}, hoverinfo="x+y"))
    fig.update_layout(height=40, width=160, margin={"l": 0, "r": 0, "t": 0, "b": 0}, showlegend=False,
                      xaxis={"visible": False}, yaxis={"visible": False})
    return fig.to_json()
