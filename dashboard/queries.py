"""What the pages read: probe runs and scrapes of one server over a time range, statuses, baselines.

Every query is one server over a window, which is what the collectors' indexes are built for.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from collectors.models import ProbeRun, Scrape, Server

# Caps until the database downsamples (a 30-day window at 15 s scrapes is 170 000 rows).
MAX_RUNS = 2000
MAX_SCRAPES = 5000
BASELINE_RUNS = 10
ACTIVE = (ProbeRun.Status.QUEUED, ProbeRun.Status.RUNNING)


def decode_by_context(run: ProbeRun) -> dict[int, float]:
    """{context: median decode tok/s} of a run's two-point measurements, from its stored summary."""
    table = (run.summary or {}).get("decode_by_context") or {}
    return {int(k): v["median"] for k, v in sorted(table.items(), key=lambda kv: int(kv[0])) if v.get("median")}


def decode_by_output(run: ProbeRun) -> dict[int, float]:
    table = (run.summary or {}).get("decode_by_output") or {}
    return {int(k): v["median"] for k, v in sorted(table.items(), key=lambda kv: int(kv[0])) if v.get("median")}


def run_tau(run: ProbeRun) -> float | None:
    # The server's own counters when it has them; τ from response fields otherwise.
    return run.tau_counters if run.tau_counters is not None else run.tau_responses


def succeeded_runs(server: Server, since: datetime) -> list[ProbeRun]:
    """Succeeded runs in the window, oldest first."""
    qs = server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED, finished_at__gte=since).order_by("-finished_at")
    return list(reversed(qs.defer("load_before", "load_after", "plan")[:MAX_RUNS]))


def scrapes(server: Server, since: datetime) -> list[Scrape]:
    """Good scrapes in the window, oldest first."""
    qs = server.scrapes.filter(ok=True, at__gte=since).order_by("-at").defer("totals")
    return list(reversed(qs[:MAX_SCRAPES]))


def latest_run(server: Server) -> ProbeRun | None:
    return server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED).order_by("-finished_at").first()


def active_manual_run(server: Server) -> ProbeRun | None:
    return server.probe_runs.filter(trigger=ProbeRun.Trigger.MANUAL, status__in=ACTIVE).order_by("-queued_at").first()


def status(server: Server, latest_scrape: Scrape | None) -> str:
    """probing | up | down | quiet (no scrape for three intervals) | unknown (never scraped)."""
    if server.probe_runs.filter(status=ProbeRun.Status.RUNNING).exists():
        return "probing"
    if latest_scrape is None:
        return "unknown"
    if not latest_scrape.ok:
        return "down"
    quiet_after = timedelta(seconds=max(3 * server.scrape_interval_s, 120))
    return "quiet" if timezone.now() - latest_scrape.at > quiet_after else "up"


@dataclass(frozen=True)
class Baseline:
    median: float
    mad: float
    n: int


def baselines(run: ProbeRun, n: int = BASELINE_RUNS) -> dict[int, Baseline]:
    """Per context: median ± MAD of the last n clean succeeded runs before this one."""
    earlier: QuerySet[ProbeRun] = ProbeRun.objects.filter(
        server_id=run.server_id, status=ProbeRun.Status.SUCCEEDED, contaminated=False
    ).exclude(pk=run.pk)
    if run.finished_at:
        earlier = earlier.filter(finished_at__lt=run.finished_at)
    points: dict[int, list[float]] = {}
    for other in earlier.order_by("-finished_at").only("summary")[:n]:
        for context, value in decode_by_context(other).items():
            points.setdefault(context, []).append(value)
    out = {}
    for context, values in points.items():
        med = statistics.median(values)
        out[context] = Baseline(med, statistics.median(abs(v - med) for v in values), len(values))
    return out


def diff_lines(run: ProbeRun) -> list[str]:
    """'decode tok/s at 3072: 112.4, baseline 115.0 ± 1.2, −2.3 %' for each probed context."""
    base = baselines(run)
    lines = []
    for context, value in decode_by_context(run).items():
        b = base.get(context)
        if b is None:
            lines.append(f"decode tok/s at {context}: {value:.1f}, no baseline yet")
            continue
        change = (value - b.median) / b.median * 100 if b.median else 0.0
        sign = "−" if change < 0 else "+"
        lines.append(f"decode tok/s at {context}: {value:.1f}, baseline {b.median:.1f} ± {b.mad:.1f}, "
                     f"{sign}{abs(change):.1f} %")
    return lines


def fingerprint_label(fingerprint: Any) -> str:
    """A short, human label of a server fingerprint for hovers and tables."""
    if not isinstance(fingerprint, dict):
        return ""
    model = fingerprint.get("model")
    if isinstance(model, dict):  # the bundled engine reports {name, sha256}
        model = model.get("name")
    parts = [str(p) for p in (fingerprint.get("kind"), model, fingerprint.get("version")) if p]
    if fingerprint.get("hash"):
        parts.append(f"#{str(fingerprint['hash'])[:8]}")
    return " · ".join(parts)[:160]
