"""Plotly figures built server-side from stored rows; the page hands each to plotly.js as JSON.

Every builder returns `fig.to_plotly_json()` (plain dicts/lists, datetimes left to Django's JSON encoder),
which templates embed with `json_script`, so server-provided strings are escaped in the page.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from collectors.models import ProbeMeasurement, ProbeRun, Scrape
from dashboard.queries import Baseline, decode_by_context, decode_by_output, fingerprint_label, run_tau

Figure = dict[str, Any]
FAINT = "rgba(31, 119, 180, 0.25)"
BOLD = "rgb(31, 119, 180)"


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 320) -> Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=height, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 40, "b": 50}, legend={"orientation": "h", "y": -0.25})
    if not any(trace.y is not None and any(v is not None for v in trace.y) for trace in fig.data):
        # Say so, rather than leave empty axes that read like a broken chart.
        fig.add_annotation(text="no data in this time range", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=0.5, font={"size": 14, "color": "#667"})
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    return fig.to_plotly_json()


def throughput_vs_context(runs: list[ProbeRun], baseline: dict[int, Baseline] | None = None) -> Figure:
    """One line per run; the latest bold, older faint, over the baseline band (median ± MAD of the clean
    runs before the latest), so a drop stands out against the history."""
    fig = go.Figure()
    if baseline:
        contexts = sorted(baseline)
        upper = [baseline[c].median + baseline[c].mad for c in contexts]
        lower = [baseline[c].median - baseline[c].mad for c in contexts]
        fig.add_trace(go.Scatter(x=contexts + contexts[::-1], y=upper + lower[::-1], fill="toself",
                                 fillcolor="rgba(44, 160, 44, 0.15)", line={"width": 0}, hoverinfo="skip",
                                 name=f"baseline (median ± MAD, {max(b.n for b in baseline.values())} runs)"))
    for i, run in enumerate(runs):
        latest = i == len(runs) - 1
        points = decode_by_context(run)
        label = f"run #{run.pk} {run.finished_at:%Y-%m-%d %H:%M} {fingerprint_label(run.fingerprint)}"
        fig.add_trace(go.Scatter(
            x=list(points), y=list(points.values()), mode="lines+markers", name=f"latest (run #{run.pk})" if latest
            else "older runs", showlegend=latest or i == 0, legendgroup="latest" if latest else "older",
            line={"color": BOLD if latest else FAINT, "width": 3 if latest else 1},
            hovertext=[label] * len(points), hoverinfo="x+y+text",
        ))
    return _layout(fig, "Decode throughput vs context", "context (tokens)", "decode tok/s")


def decode_over_time(runs: list[ProbeRun]) -> Figure:
    series: dict[int, tuple[list[Any], list[float]]] = {}
    for run in runs:
        for context, value in decode_by_context(run).items():
            xs, ys = series.setdefault(context, ([], []))
            xs.append(run.finished_at)
            ys.append(value)
    fig = go.Figure([go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"ctx {c}") for c, (xs, ys) in
                     sorted(series.items())])
    return _layout(fig, "Decode tok/s over time, per context", "time (UTC)", "decode tok/s")


def tau_over_time(runs: list[ProbeRun], scrapes: list[Scrape]) -> Figure:
    """τ = accepted tokens per verify step (bonus included), from scrape windows and from probes."""
    fig = go.Figure()
    windows = [s for s in scrapes if s.tau is not None]
    fig.add_trace(go.Scatter(x=[s.at for s in windows], y=[s.tau for s in windows], mode="lines",
                             name="scrapes (live traffic)", line={"width": 1}))
    probed = [(r.finished_at, run_tau(r)) for r in runs if run_tau(r) is not None]
    fig.add_trace(go.Scatter(x=[t for t, _ in probed], y=[v for _, v in probed], mode="markers", name="probes",
                             marker={"size": 8}))
    return _layout(fig, "τ (accepted tokens per verify step) over time", "time (UTC)", "τ")


def output_sweep(runs: list[ProbeRun]) -> Figure:
    """Decode tok/s by output length; flat is healthy (a slope means long outputs slow down)."""
    fig = go.Figure()
    for i, run in enumerate(runs[-10:]):
        latest = i == len(runs[-10:]) - 1
        points = decode_by_output(run)
        fig.add_trace(go.Scatter(x=list(points), y=list(points.values()), mode="lines+markers",
                                 name=f"run #{run.pk}", showlegend=latest,
                                 line={"color": BOLD if latest else FAINT, "width": 3 if latest else 1}))
    return _layout(fig, "Output-length sweep (flat is healthy)", "output tokens", "decode tok/s")


def streaming_vs_plain(run: ProbeRun | None, measurements: list[ProbeMeasurement]) -> Figure:
    """The latest run: non-streamed two-point decode tok/s vs streamed tok/s at the contexts streamed."""
    plain = decode_by_context(run) if run else {}
    streamed = {m.context: m.streamed_tps for m in measurements if m.kind == "stream" and m.streamed_tps}
    contexts = sorted(streamed)
    fig = go.Figure([
        go.Bar(x=[str(c) for c in contexts], y=[plain.get(c) for c in contexts], name="non-streaming (two-point)"),
        go.Bar(x=[str(c) for c in contexts], y=[streamed[c] for c in contexts], name="streaming"),
    ])
    return _layout(fig, "Streaming vs non-streaming (latest run)", "context (tokens)", "tok/s")


def live_panel(scrapes: list[Scrape]) -> Figure:
    """From the scrapes: requests running/waiting, generation throughput, KV-cache usage."""
    fig = go.Figure()
    at = [s.at for s in scrapes]
    fig.add_trace(go.Scatter(x=at, y=[s.running for s in scrapes], name="running", mode="lines"))
    fig.add_trace(go.Scatter(x=at, y=[s.waiting for s in scrapes], name="waiting", mode="lines"))
    gen = [s.generation_tokens / s.window_s if s.generation_tokens is not None and s.window_s else None
           for s in scrapes]
    fig.add_trace(go.Scatter(x=at, y=gen, name="generation tok/s", mode="lines", yaxis="y2"))
    fig.add_trace(go.Scatter(x=at, y=[s.kv_usage * 100 if s.kv_usage is not None else None for s in scrapes],
                             name="KV usage %", mode="lines", line={"dash": "dot"}))
    fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": "generation tok/s"})
    return _layout(fig, "Live (from /metrics scrapes)", "time (UTC)", "requests / KV %")


def sparkline(runs: list[ProbeRun]) -> Figure:
    """The fleet's small trend: decode tok/s at each run's largest probed context."""
    points = [(r.finished_at, decode_by_context(r)) for r in runs]
    points = [(t, d[max(d)]) for t, d in points if d]
    fig = go.Figure(go.Scatter(x=[t for t, _ in points], y=[v for _, v in points], mode="lines",
                               line={"width": 1.5, "color": BOLD}, hoverinfo="x+y"))
    fig.update_layout(height=40, width=160, margin={"l": 0, "r": 0, "t": 0, "b": 0}, showlegend=False,
                      xaxis={"visible": False}, yaxis={"visible": False}, template="plotly_white")
    return fig.to_plotly_json()
