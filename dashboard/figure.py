"""A minimal builder of Plotly figure JSON (plotly.js's own schema: {"data": [...], "layout": {...}}).

Why not plotly's graph_objects: they validate every property on construction and deep-copy the template into
each figure, which cost ~250 ms of server time per server page (nine figures; profiled with cProfile) —
more than the whole page budget. The builders in charts.py only need traces, a layout merge and a few
shapes, so they write the JSON directly; plotly.js (served from the plotly package) draws it unchanged.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

Figure = dict[str, Any]
# plotly_white's look, spelled out once instead of shipping the template in every figure.
GRID = "#ebf0f8"
AXIS = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": GRID, "automargin": True}


@lru_cache(maxsize=8192)
def _iso(value: datetime) -> str:
    text = value.isoformat(timespec="milliseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def iso(value: Any) -> Any:
    """A datetime as the string plotly.js reads (what DjangoJSONEncoder would write); anything else as is.

    Time axes repeat the same instants across traces and figures; encoding each once (cached) is much
    cheaper than leaving thousands of datetimes to the JSON encoder's per-object fallback."""
    return _iso(value) if isinstance(value, datetime) else value


def scatter(**props: Any) -> dict[str, Any]:
    return {"type": "scatter", **props}


def bar(**props: Any) -> dict[str, Any]:
    return {"type": "bar", **props}


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


class Fig:
    def __init__(self, data: list[dict[str, Any]] | dict[str, Any] | None = None) -> None:
        self.data: list[dict[str, Any]] = [data] if isinstance(data, dict) else list(data or [])
        self.layout: dict[str, Any] = {"paper_bgcolor": "white", "plot_bgcolor": "white",
                                       "xaxis": dict(AXIS), "yaxis": dict(AXIS)}

    def add_trace(self, trace: dict[str, Any]) -> None:
        self.data.append(trace)

    def update_layout(self, **props: Any) -> None:
        _merge(self.layout, props)

    def update_xaxes(self, **props: Any) -> None:
        _merge(self.layout["xaxis"], props)

    def update_yaxes(self, **props: Any) -> None:
        _merge(self.layout["yaxis"], props)

    def add_vline(self, x: Any, line: dict[str, Any]) -> None:
        """A vertical line across the whole plot height at x."""
        self.layout.setdefault("shapes", []).append(
            {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": line})

    def add_annotation(self, **props: Any) -> None:
        self.layout.setdefault("annotations", []).append(props)

    def has_data(self) -> bool:
        return any(any(v is not None for v in trace.get("y") or []) for trace in self.data)

    def to_json(self) -> Figure:
        for trace in self.data:
            if isinstance(trace.get("x"), list):
                trace["x"] = [iso(v) for v in trace["x"]]
        return {"data": self.data, "layout": self.layout}
