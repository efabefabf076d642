"""Alerts from /metrics (DESIGN §6): metrics stale, schema changed, and τ from scrape windows.

After a probe run (collectors/alerts.py calls `check_metrics_health`):
- stale: the probe's own scrapes before and after it show the request and generation-token counters
  standing still for `stale_after` runs in a row, though the probe sent requests;
- schema changed: a counter family the normaliser reads was in the previous run's scrape and is gone now.

After a periodic scrape (collectors/tasks.py calls `after_scrape`): the window's τ (1 + Δaccepted /
Δverify steps, the bonus token included; engine_client.metrics.window) is a point of the series
`tau_scrape`, fed by real traffic rather than by probes. Windows with fewer than `scrape_min_steps`
verify steps are skipped (a handful of steps is noise), and so are windows across a restart. Change
points are stored like the probe series'. There is no re-probe to confirm with, so the next windows
confirm: an alert opens when the last 1 + `confirmations` windows are all below the baseline of the
windows before them, and resolves like the probe series.
"""

from __future__ import annotations

import logging
import statistics

from collectors.alerts import (
    AlertParams,
    Evaluation,
    Point,
    active_alert,
    maybe_resolve,
    open_alert,
    resolve,
    segment_start,
    store_change_points,
)
from collectors.detection.baseline import SUSPECT, check, robust_baseline
from collectors.detection.metrics_health import counters_moved, schema_change
from collectors.detection.series import TAU_SCRAPE, SeriesKey
from collectors.models import Alert, ProbeRun, RawSample, Scrape, Server

log = logging.getLogger(__name__)


def check_metrics_health(server: Server, run: ProbeRun, params: AlertParams, ev: Evaluation) -> None:
    """After a succeeded probe run: the stale and schema checks."""
    _check_stale(server, run, params, ev)
    _check_schema(server, run, ev)


def _run_scrapes(run: ProbeRun) -> tuple[Scrape, Scrape] | None:
    """The good scrapes a probe run took before and after its requests (collectors/probing.py)."""
    if run.started_at is None or run.finished_at is None:
        return None
    scrapes = list(Scrape.objects.filter(server_id=run.server_id, ok=True, totals__isnull=False,
                                         at__gte=run.started_at, at__lte=run.finished_at).order_by("at", "pk"))
    return (scrapes[0], scrapes[-1]) if len(scrapes) >= 2 else None


def _counters_moved(run: ProbeRun) -> bool | None:
    scrapes = _run_scrapes(run)
    return counters_moved(scrapes[0].totals or {}, scrapes[1].totals or {}) if scrapes else None


def _check_stale(server: Server, run: ProbeRun, params: AlertParams, ev: Evaluation) -> None:
    """Counters that did not move while `stale_after` probe runs in a row sent requests → "metrics stale"."""
    kind = Alert.Kind.METRICS_STALE
    recent = list(ProbeRun.objects.filter(server=server, status=ProbeRun.Status.SUCCEEDED,
                                          queued_at__lte=run.queued_at).order_by("-queued_at", "-pk")
                  [: params.stale_after])
    moved = [_counters_moved(r) for r in recent]
    if len(recent) == params.stale_after and all(m is False for m in moved):
        alert = open_alert(server, kind, confirming_runs=recent,
                           note=f"{len(recent)} probe run(s) in a row sent requests, but the request and "
                           "generation-token counters on /metrics did not move: the exporter is frozen or "
                           "detached, so scrape-based charts and τ are stale")
        if alert is not None:
            ev.opened.append(alert)
    elif moved and moved[0]:
        resolve(active_alert(server, kind), "the counters move with the probe's requests again", ev)


def _sample_names(scrape: Scrape) -> set[str]:
    return set(RawSample.objects.filter(scrape=scrape).values_list("name", flat=True).distinct())


def _check_schema(server: Server, run: ProbeRun, ev: Evaluation) -> None:
    """Families the normaliser reads that the previous probe run's scrape had and this one lacks →
    "schema changed", with the families that appeared (likely the new names) alongside."""
    kind = Alert.Kind.SCHEMA_CHANGED
    scrapes = _run_scrapes(run)
    if scrapes is None:
        return
    now = _sample_names(scrapes[1])
    active = active_alert(server, kind)
    if active is not None:
        missing = (active.fingerprint_before or {}).get("metric_families") or []
        present = {n.removesuffix("_total") for n in now}
        if all(n.removesuffix("_total") in present for n in missing):
            resolve(active, "the metric families are back", ev)
        return
    previous = (ProbeRun.objects.filter(server=server, status=ProbeRun.Status.SUCCEEDED, queued_at__lt=run.queued_at)
                .exclude(pk=run.pk).order_by("-queued_at", "-pk").first())
    before = _run_scrapes(previous) if previous is not None else None
    reference = before[1] if before else (Scrape.objects.filter(server=server, ok=True, totals__isnull=False,
                                                                at__lt=scrapes[0].at).order_by("-at").first())
    if reference is None:
        return
    vanished, appeared = schema_change(reference.kind, _sample_names(reference), now)
    if not vanished:
        return
    alert = open_alert(
        server, kind, confirming_runs=[run], fingerprint_before={"metric_families": vanished},
        fingerprint_after={"metric_families": appeared},
        note=f"/metrics no longer has {', '.join(vanished)}" + (f"; new: {', '.join(appeared)}" if appeared else ""),
    )
    if alert is not None:
        ev.opened.append(alert)


# --- τ from scrape windows -----------------------------------------------------------------------------


def scrape_points(server: Server, upto: Scrape, params: AlertParams) -> list[Point]:
    """The `tau_scrape` series up to `upto`, oldest first."""
    rows = (Scrape.objects.filter(server=server, ok=True, reset=False, tau__isnull=False,
                                  steps__gte=params.scrape_min_steps, at__lte=upto.at)
            .order_by("-at", "-pk").values_list("at", "tau")[: params.history])
    return [Point(None, tau, at) for at, tau in reversed(rows)]


def after_scrape(scrape: Scrape, params: AlertParams | None = None) -> Evaluation:
    """Detection on the `tau_scrape` series after a good scrape with enough verify steps."""
    ev = Evaluation()
    params = params or AlertParams.from_settings()
    if not scrape.ok or scrape.reset or scrape.tau is None or (scrape.steps or 0) < params.scrape_min_steps:
        return ev
    server = Server.objects.get(pk=scrape.server_id)
    key = SeriesKey(TAU_SCRAPE)
    points = scrape_points(server, scrape, params)
    if not points or points[-1].at != scrape.at:
        return ev
    cps = store_change_points(server, key, points, params)
    kind = Alert.Kind.ACCEPTANCE_REGRESSION
    alert = active_alert(server, kind, key)
    if alert is not None:
        maybe_resolve(alert, key, points, params, ev)
        return ev
    start = len(points) - 1 - params.confirmations
    if start < 0:
        return ev
    base = robust_baseline([p.value for p in points[segment_start(cps, start) : start]], params.baseline)
    recent = points[start:]
    if base is None or not all(
        check(p.value, base, higher_is_better=True, params=params.baseline).kind == SUSPECT for p in recent
    ):
        return ev
    new = statistics.median(p.value for p in recent)
    opened = open_alert(
        server, kind, key, old_level=base.level, old_spread=base.spread, new_level=new,
        new_spread=(max(p.value for p in recent) - min(p.value for p in recent)) / 2,
        rel_change=new / base.level - 1 if base.level else None,
        note=f"τ from /metrics windows: {base.level:.4g} → {new:.4g} ({new / base.level - 1:+.1%}) over the last "
        f"{len(recent)} scrape windows of live traffic",
    )
    if opened is not None:
        ev.opened.append(opened)
    return ev
