"""Detection after a probe run, and the alert lifecycle (DESIGN §3 step 4, §6).

After a succeeded, non-contaminated run, for every series the run touched:

1. Change points over the series' history are found and new ones stored (ChangePoint rows; the
   charts draw them; improvements are stored as such and never alert).
2. An active alert on the series: resolve it once the last `resolve_after` points are back within
   the baseline it opened against (or have recovered `resolve_fraction` of the drop). Otherwise a
   regression change point that has held for `change_point_alert_points` runs opens one (the
   second detector, a backstop). Otherwise:
3. The fast check (median ± k·MAD of the points since the last change point). A scheduled or manual
   run that looks worse is only *suspect*: ONE confirmation ProbeRun (trigger "confirmation",
   `confirms` = the suspect run) is queued (`confirmations` > 1: each confirmation that agrees queues
   the next). When the last one succeeds, the series where the suspect and every confirmation point
   are worse than the baseline before the suspect open an alert.
4. τ ≤ `tau_not_paying` on the last `not_paying_after` runs opens "speculation not paying" (and a
   confirmed τ drop that lands there is that kind, not a second alert); so does a decode rate below
   the server's own non-speculative rate (`Server.nonspec_decode_tps`). A `transport_artefact` flag
   opens "transport artefact". Each resolves when the condition goes away.
5. The /metrics checks (stale counters, vanished families): collectors/alerts_metrics.py, which also
   runs detection on τ from periodic scrape windows.

Parameters: `AlertParams.from_settings()` (SPECTATOR_DETECT_* in dashboard/settings.py).

After a failed run: `unreachable_after` consecutive failed runs open "unreachable"; the next
succeeded run resolves it. Every state change is a conditional UPDATE plus an AlertEvent row, and
the partial unique index on Alert makes a second open of the same series and kind a no-op.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from collectors.detection.baseline import SUSPECT, Baseline, BaselineParams, check, robust_baseline
from collectors.detection.changepoints import ChangePointParams, find_change_points
from collectors.detection.series import DECODE_TPS, TAU, TTFT, SeriesKey, run_points
from collectors.models import Alert, AlertEvent, ChangePoint, ProbeMeasurement, ProbeRun, Server
from collectors.notify import notify_on_commit

log = logging.getLogger(__name__)

Enqueue = Callable[[Server, ProbeRun], None]

KIND_FOR_QUANTITY = {
    DECODE_TPS: Alert.Kind.THROUGHPUT_REGRESSION,
    TTFT: Alert.Kind.THROUGHPUT_REGRESSION,
    TAU: Alert.Kind.ACCEPTANCE_REGRESSION,
}

# Which states a transition may start from (the conditional UPDATE's WHERE).
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    Alert.State.ACKNOWLEDGED: (Alert.State.OPEN,),
    Alert.State.RESOLVED: (Alert.State.OPEN, Alert.State.ACKNOWLEDGED),
    # Triage after the fact: a resolved alert can still be called a false positive.
    Alert.State.FALSE_POSITIVE: (Alert.State.OPEN, Alert.State.ACKNOWLEDGED, Alert.State.RESOLVED),
}


@dataclass(frozen=True)
class AlertParams:
    history: int = 200  # points per series given to the change-point detector
    resolve_after: int = 2  # consecutive points back at baseline before an alert resolves itself
    resolve_fraction: float = 0.8  # …or this much of the drop recovered
    unreachable_after: int = 3  # consecutive failed probe runs before "unreachable"
    tau_not_paying: float = 1.05  # τ at or below this: the drafter's tokens are (almost) never accepted
    not_paying_after: int = 2  # consecutive runs with τ that low (or decode below the non-speculative rate)
    # Runs at the new level before a change point alone opens an alert: its position and levels are
    # provisional for the first few points (ChangePointParams.min_segment is the least it can see).
    change_point_alert_points: int = 4
    confirmations: int = 1  # re-probes that must agree with a suspect run before an alert opens
    stale_after: int = 2  # consecutive probe runs whose counters did not move → "metrics stale"
    scrape_min_steps: int = 20  # a scrape window with fewer verify steps gives no τ point (too noisy)
    # Decode rate and TTFT move with the host's load, τ does not (a ratio of counts): a box shared with
    # other work may need a larger minimum change for them alone. None = baseline.min_rel_change.
    throughput_min_rel_change: float | None = None
    baseline: BaselineParams = field(default_factory=BaselineParams)
    change_points: ChangePointParams = field(default_factory=ChangePointParams)

    def for_quantity(self, quantity: str) -> AlertParams:
        """These parameters as they apply to one quantity's series."""
        rel = self.throughput_min_rel_change
        if rel is None or quantity not in (DECODE_TPS, TTFT):
            return self
        return replace(self, baseline=replace(self.baseline, min_rel_change=rel),
                       change_points=replace(self.change_points, min_rel_change=rel))

    @classmethod
    def from_settings(cls) -> AlertParams:
        """The SPECTATOR_DETECT_* settings (dashboard/settings.py; defaults in collectors/DETECTION.md)."""
        from django.conf import settings as s

        rel = s.SPECTATOR_DETECT_MIN_REL_CHANGE
        return cls(
            resolve_after=s.SPECTATOR_DETECT_RESOLVE_AFTER, unreachable_after=s.SPECTATOR_DETECT_UNREACHABLE_AFTER,
            tau_not_paying=s.SPECTATOR_DETECT_TAU_NOT_PAYING, not_paying_after=s.SPECTATOR_DETECT_NOT_PAYING_AFTER,
            change_point_alert_points=s.SPECTATOR_DETECT_CHANGE_POINT_ALERT_POINTS,
            confirmations=s.SPECTATOR_DETECT_CONFIRMATIONS, stale_after=s.SPECTATOR_DETECT_STALE_AFTER,
            scrape_min_steps=s.SPECTATOR_DETECT_SCRAPE_MIN_STEPS,
            throughput_min_rel_change=s.SPECTATOR_DETECT_THROUGHPUT_MIN_REL_CHANGE,
            baseline=BaselineParams(window=s.SPECTATOR_DETECT_BASELINE_WINDOW,
                                    min_points=s.SPECTATOR_DETECT_BASELINE_MIN_POINTS, k=s.SPECTATOR_DETECT_MAD_K,
                                    min_rel_change=rel),
            change_points=ChangePointParams(max_pvalue=s.SPECTATOR_DETECT_MAX_PVALUE, min_rel_change=rel),
        )


# --- lifecycle ---------------------------------------------------------------------------------------


def open_alert(
    server: Server,
    kind: str,
    key: SeriesKey | None = None,
    *,
    note: str = "",
    confirming_runs: list[ProbeRun] | tuple[ProbeRun, ...] = (),
    **fields: Any,
) -> Alert | None:
    """Open an alert, or return None when one is already active for this series and kind."""
    series = {"quantity": key.quantity, "context": key.context, "output_len": key.output_len} if key else {}
    try:
        with transaction.atomic():
            alert = Alert.objects.create(server=server, kind=kind, note=note, **series, **fields)
            event = AlertEvent.objects.create(alert=alert, from_state="", to_state=Alert.State.OPEN, note=note)
            if confirming_runs:
                alert.confirming_runs.set(confirming_runs)
            notify_on_commit(event)  # the e-mails' rows commit with the event; sent after commit
    except IntegrityError:
        return None  # the partial unique index: another worker (or an earlier run) opened it first
    log.warning("alert opened: %s", alert)
    return alert


def transition(alert: Alert, to_state: str, *, by: Any = None, note: str = "") -> bool:
    """Move an alert to `to_state` if it is in an allowed state; False when another change won."""
    now = timezone.now()
    fields: dict[str, Any] = {"state": to_state, "updated_at": now}
    if to_state in (Alert.State.RESOLVED, Alert.State.FALSE_POSITIVE):
        fields["resolved_at"] = now
    if note and to_state == Alert.State.FALSE_POSITIVE:
        fields["note"] = note
    with transaction.atomic():
        changed = Alert.objects.filter(pk=alert.pk, state__in=ALLOWED_FROM[to_state]).update(**fields)
        if changed != 1:
            return False
        event = AlertEvent.objects.create(alert=alert, from_state=alert.state, to_state=to_state, by=by, note=note)
        notify_on_commit(event)  # resolves are mailed (collectors/notify.MAILED); other changes are not
    for name, value in fields.items():
        setattr(alert, name, value)
    return True


def active_alert(server: Server, kind: str, key: SeriesKey | None = None) -> Alert | None:
    series = {"quantity": key.quantity, "context": key.context, "output_len": key.output_len} if key else {
        "quantity": "", "context": 0, "output_len": 0}
    return Alert.objects.filter(server=server, kind=kind, state__in=Alert.ACTIVE, **series).first()


# --- series history ------------------------------------------------------------------------------------


@dataclass
class Point:
    run: ProbeRun | None  # None for a point from a scrape window (collectors/alerts_metrics.py)
    value: float
    at: datetime  # when it was measured: the run's start, or the scrape's time


def _tau(run: ProbeRun) -> float | None:
    return run.tau_counters if run.tau_counters is not None else run.tau_responses


def load_history(server: Server, upto: ProbeRun, limit: int) -> dict[SeriesKey, list[Point]]:
    """Every series' points from succeeded, non-contaminated runs up to `upto`, oldest first."""
    runs = list(
        ProbeRun.objects.filter(
            server=server, status=ProbeRun.Status.SUCCEEDED, contaminated=False, queued_at__lte=upto.queued_at
        ).order_by("-queued_at", "-pk")[:limit]
    )[::-1]
    by_run: dict[int, list[dict[str, Any]]] = {}
    fields = ("run_id", "kind", "context", "output_len", "decode_tps", "ttft_s")
    for m in ProbeMeasurement.objects.filter(run_id__in=[r.pk for r in runs]).values(*fields):
        by_run.setdefault(m["run_id"], []).append(m)
    history: dict[SeriesKey, list[Point]] = {}
    for run in runs:
        for key, value in run_points(by_run.get(run.pk, []), tau=_tau(run)).items():
            history.setdefault(key, []).append(Point(run, value, run.started_at or run.queued_at))
    return history


def store_change_points(server: Server, key: SeriesKey, points: list[Point], params: AlertParams) -> list[int]:
    """Store newly found change points; return the indexes in `points` of the stored ones, in order.

    A change point near the end of the history is provisional: its position and levels firm up as
    points arrive, so one found again within two points of a stored one updates that row.
    """
    found = find_change_points([p.value for p in points], higher_is_better=key.higher_is_better,
                               params=params.change_points)
    series = {"server": server, "quantity": key.quantity, "context": key.context, "output_len": key.output_len}
    position = {p.at: i for i, p in enumerate(points)}
    stored = {position[at]: pk for pk, at in ChangePoint.objects.filter(**series).values_list("pk", "at")
              if at in position}
    for cp in found:
        point = points[cp.index]
        fields = {
            "run": point.run, "at": point.at, "index": cp.index, "old_level": cp.old_level,
            "old_spread": cp.old_spread, "new_level": cp.new_level, "new_spread": cp.new_spread,
            "rel_change": cp.rel_change, "p_value": cp.p_value, "direction": cp.direction,
        }
        near = [i for i in stored if abs(cp.index - i) <= 2]
        if near:
            pk = stored.pop(near[0])
            ChangePoint.objects.filter(pk=pk).update(**fields)
        else:
            pk = ChangePoint.objects.create(**series, **fields).pk
        stored[cp.index] = pk
    return sorted(stored)


def _fingerprint_change(before: ProbeRun | None, after: ProbeRun) -> dict[str, Any]:
    if before is None or before.fingerprint == after.fingerprint:
        return {}
    return {"fingerprint_before": before.fingerprint, "fingerprint_after": after.fingerprint}


# --- after a run -----------------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """What detection did after one run (for logs and tests)."""

    suspects: list[SeriesKey] = field(default_factory=list)
    confirmation: ProbeRun | None = None
    opened: list[Alert] = field(default_factory=list)
    resolved: list[Alert] = field(default_factory=list)


def after_probe_run(run: ProbeRun, *, enqueue: Enqueue | None = None, params: AlertParams | None = None) -> Evaluation:
    """Detection after a probe run ended (called by collectors/probing.py; errors are the caller's)."""
    params = params or AlertParams.from_settings()
    server = Server.objects.get(pk=run.server_id)
    if run.status == ProbeRun.Status.FAILED:
        return _after_failed_run(server, run, params)
    if run.status != ProbeRun.Status.SUCCEEDED:
        return Evaluation()
    ev = Evaluation()
    resolve(active_alert(server, Alert.Kind.UNREACHABLE), "a probe run succeeded", ev)
    from collectors.alerts_metrics import check_metrics_health

    check_metrics_health(server, run, params, ev)
    if run.contaminated:
        return ev  # other traffic overlapped: the numbers say nothing about the server
    _check_transport(server, run, ev)
    history = load_history(server, run, params.history)
    for key, points in history.items():
        if points[-1].run.pk == run.pk:
            _evaluate_series(server, run, key, points, params, ev)
    _check_nonspec_baseline(server, history, run, params, ev)
    if ev.suspects:
        ev.confirmation = _queue_confirmation(server, run, enqueue)
    return ev


def _evaluate_series(
    server: Server, run: ProbeRun, key: SeriesKey, points: list[Point], params: AlertParams, ev: Evaluation
) -> None:
    params = params.for_quantity(key.quantity)
    cps = store_change_points(server, key, points, params)
    last_cp = cps[-1] if cps else 0
    if key.quantity == TAU:
        _check_not_paying(server, key, points, cps, params, ev)
    kind = KIND_FOR_QUANTITY[key.quantity]
    if key.quantity == TAU and active_alert(server, Alert.Kind.SPECULATION_NOT_PAYING, key) is not None:
        return  # τ collapsed to 1: that alert says it all, and resolves itself when τ is back
    alert = active_alert(server, kind, key)
    if alert is not None:
        maybe_resolve(alert, key, points, params, ev)
        return
    if _open_from_change_point(server, kind, key, points, last_cp, params, ev):
        return
    chain = _confirmation_chain(run)
    if chain[0].trigger == ProbeRun.Trigger.CONFIRMATION:
        return  # the suspect run is gone (retention): nothing to confirm against
    at = next((i for i, p in enumerate(points) if p.run.pk == chain[0].pk), None)
    if at is None:
        return  # the suspect run had no point in this series (or was contaminated)
    # The baseline: stable points since the last change point before the suspect run, strictly before
    # it (a change point at the suspect itself is the drop being confirmed, not a new normal).
    before = points[segment_start(cps, at) : at]
    base = robust_baseline([p.value for p in before], params.baseline)
    if base is None:
        return
    in_chain = {r.pk for r in chain}
    confirming = [p for p in points[at:] if p.run.pk in in_chain]
    verdicts = [check(p.value, base, higher_is_better=key.higher_is_better, params=params.baseline) for p in confirming]
    if not all(v.kind == SUSPECT for v in verdicts):
        return
    if len(confirming) - 1 < params.confirmations:
        ev.suspects.append(key)  # worse, but not confirmed often enough yet: one more re-probe
        return
    _open_regression(server, kind, key, base, confirming, before[-1].run if before else None, params, ev)


def _confirmation_chain(run: ProbeRun) -> list[ProbeRun]:
    """The suspect run and the confirmation runs after it, oldest first; [run] for a suspect run itself.

    Each confirmation `confirms` the run before it, so with SPECTATOR_DETECT_CONFIRMATIONS = 2 the chain
    is suspect ← confirmation ← confirmation.
    """
    chain = [run]
    while chain[0].trigger == ProbeRun.Trigger.CONFIRMATION and chain[0].confirms_id and len(chain) < 10:
        previous = ProbeRun.objects.filter(pk=chain[0].confirms_id).first()
        if previous is None:
            break
        chain.insert(0, previous)
    return chain


def _open_from_change_point(
    server: Server, kind: str, key: SeriesKey, points: list[Point], last_cp: int, params: AlertParams,
    ev: Evaluation,
) -> bool:
    """The second detector: a regression change point whose new level still holds at the latest point.

    It catches what the fast check missed (no baseline yet, a lost confirmation run, a drop smaller
    than k·MAD but significant over several points). The points after the change point are its
    confirmation. A drop that already had an alert (in any state, e.g. marked false positive) since
    the change point is not raised again.
    """
    if last_cp == 0 or len(points) - last_cp < params.change_point_alert_points:
        return False
    cp_run = points[last_cp].run
    cp = ChangePoint.objects.filter(server=server, quantity=key.quantity, context=key.context,
                                    output_len=key.output_len, run=cp_run).first()
    if cp is None or cp.direction != ChangePoint.Direction.REGRESSION:
        return False
    series = {"quantity": key.quantity, "context": key.context, "output_len": key.output_len}
    kinds = [kind, Alert.Kind.SPECULATION_NOT_PAYING]  # a τ collapse already told as "not paying" counts
    if Alert.objects.filter(server=server, kind__in=kinds, opened_at__gte=cp_run.queued_at, **series).exists():
        return False
    latest = points[-1].value
    if abs(latest - cp.new_level) >= abs(latest - cp.old_level):
        return False  # the latest run is back nearer the old level: a dip, not (yet) a new level
    alert = open_alert(
        server, kind, key, old_level=cp.old_level, old_spread=cp.old_spread, new_level=cp.new_level,
        new_spread=cp.new_spread, rel_change=cp.rel_change, change_point=cp,
        confirming_runs=[p.run for p in points[last_cp:]],
        **_fingerprint_change(points[last_cp - 1].run, cp_run),
        note=f"{key.label()}: {cp.old_level:.4g} → {cp.new_level:.4g} ({cp.rel_change:+.1%}), a change point "
        f"(p = {cp.p_value:.2g}) over {len(points) - last_cp} probe runs",
    )
    if alert is not None:
        ev.opened.append(alert)
    return True


def _open_regression(
    server: Server, kind: str, key: SeriesKey, base: Baseline, confirming: list[Point], last_good: ProbeRun | None,
    params: AlertParams, ev: Evaluation,
) -> None:
    values = [p.value for p in confirming]
    new = statistics.median(values)
    if key.quantity == TAU and new <= params.tau_not_paying:
        kind = Alert.Kind.SPECULATION_NOT_PAYING  # one alert (and one e-mail) for a τ that fell to 1
    alert = open_alert(
        server, kind, key, old_level=base.level, old_spread=base.spread, new_level=new,
        new_spread=(max(values) - min(values)) / 2, rel_change=new / base.level - 1 if base.level else None,
        confirming_runs=[p.run for p in confirming], **_fingerprint_change(last_good, confirming[0].run),
        note=f"{key.label()}: {base.level:.4g} → {new:.4g} ({new / base.level - 1:+.1%}), confirmed by "
        f"{len(confirming) - 1} re-probe(s)",
    )
    if alert is not None:
        ev.opened.append(alert)


def maybe_resolve(alert: Alert, key: SeriesKey, points: list[Point], params: AlertParams, ev: Evaluation) -> None:
    if alert.old_level is None:
        return
    confirming = set(alert.confirming_runs.values_list("pk", flat=True))
    since = [p for p in points if p.at >= alert.opened_at and (p.run is None or p.run.pk not in confirming)]
    recent = since[-params.resolve_after :]
    if len(recent) < params.resolve_after:
        return
    base = Baseline(level=alert.old_level, spread=alert.old_spread or 0.0, n=0)

    def recovered(value: float) -> bool:
        if check(value, base, higher_is_better=key.higher_is_better, params=params.baseline).kind != SUSPECT:
            return True
        # Or most of the drop is gone: a quantised series (τ of a small model) has MAD 0 and wanders by
        # a few per cent, so "within the baseline band" alone can keep a recovered series open.
        new = alert.new_level if alert.new_level is not None else base.level
        drop = base.level - new  # negative for a lower-is-better series (TTFT): the ratio still works
        return drop != 0 and (value - new) / drop >= params.resolve_fraction

    if all(recovered(p.value) for p in recent):
        resolve(alert, f"{key.label()} back at {statistics.median(p.value for p in recent):.4g}", ev)


def resolve(alert: Alert | None, note: str, ev: Evaluation) -> None:
    if alert is not None and transition(alert, Alert.State.RESOLVED, note=note):
        ev.resolved.append(alert)


def segment_start(cps: list[int], at: int) -> int:
    """Where the level that point `at` is compared with starts: the last change point before `at`."""
    return max((i for i in cps if i < at), default=0)


def _check_not_paying(
    server: Server, key: SeriesKey, points: list[Point], cps: list[int], params: AlertParams, ev: Evaluation
) -> None:
    """τ at or below `tau_not_paying` on the last `not_paying_after` runs: the drafter earns nothing."""
    kind = Alert.Kind.SPECULATION_NOT_PAYING
    recent = points[-params.not_paying_after :]
    low = len(recent) == params.not_paying_after and all(p.value <= params.tau_not_paying for p in recent)
    if low:
        # The level it fell from: the stable points before the low streak (for the e-mail's numbers).
        start = len(points) - len(recent)
        before = points[segment_start(cps, start) : start]
        while before and before[-1].value <= params.tau_not_paying:
            before.pop()
        base = robust_baseline([p.value for p in before], params.baseline)
        levels: dict[str, Any] = {}
        if base is not None:
            rel = statistics.median(p.value for p in recent) / base.level - 1
            levels = {"old_level": base.level, "old_spread": base.spread, "rel_change": rel}
        values = [p.value for p in recent]
        alert = open_alert(
            server, kind, key, new_level=statistics.median(values), new_spread=(max(values) - min(values)) / 2,
            confirming_runs=[p.run for p in recent], **levels,
            note=f"τ = {recent[-1].value:.3g} on {len(recent)} probe runs in a row: drafted tokens are almost "
            "never accepted",
        )
        if alert is not None:
            ev.opened.append(alert)
    elif points[-1].value > params.tau_not_paying:
        resolve(active_alert(server, kind, key), f"τ = {points[-1].value:.3g}", ev)


def _check_nonspec_baseline(server: Server, history: dict[SeriesKey, list[Point]], run: ProbeRun,
                            params: AlertParams, ev: Evaluation) -> None:
    """Decode rate below the server's non-speculative rate (Server.nonspec_decode_tps) on the last
    `not_paying_after` runs → "speculation not paying", on the shortest two-point context's series
    (the user measures the plain rate at a short context; longer contexts are slower for both)."""
    keys = sorted(k for k in history if k.quantity == DECODE_TPS and k.output_len == 0)
    if not keys or history[keys[0]][-1].run.pk != run.pk:
        return
    key, points = keys[0], history[keys[0]]
    kind, floor = Alert.Kind.SPECULATION_NOT_PAYING, server.nonspec_decode_tps
    if not floor:
        resolve(active_alert(server, kind, key), "no non-speculative decode rate is set any more", ev)
        return
    recent = points[-params.not_paying_after :]
    if len(recent) == params.not_paying_after and all(p.value < floor for p in recent):
        values = [p.value for p in recent]
        new = statistics.median(values)
        alert = open_alert(
            server, kind, key, old_level=floor, old_spread=0.0, new_level=new,
            new_spread=(max(values) - min(values)) / 2, rel_change=new / floor - 1,
            confirming_runs=[p.run for p in recent],
            note=f"{key.label()}: {new:.4g} tok/s is below the non-speculative rate {floor:.4g} tok/s set for "
            f"this server on {len(recent)} probe runs in a row",
        )
        if alert is not None:
            ev.opened.append(alert)
    elif points[-1].value >= floor:
        resolve(active_alert(server, kind, key), f"{key.label()} = {points[-1].value:.4g} ≥ {floor:.4g}", ev)


def _check_transport(server: Server, run: ProbeRun, ev: Evaluation) -> None:
    kind = Alert.Kind.TRANSPORT_ARTEFACT
    if "transport_artefact" in (run.flags or []):
        alert = open_alert(server, kind, confirming_runs=[run],
                           note="the streamed rate is far below the two-point rate: a buffering proxy or tunnel")
        if alert is not None:
            ev.opened.append(alert)
    elif run.plan.get("stream_check", True) is not False:
        resolve(active_alert(server, kind), "the streamed rate matches the two-point rate again", ev)


def _queue_confirmation(server: Server, run: ProbeRun, enqueue: Enqueue | None) -> ProbeRun | None:
    waiting = (ProbeRun.Status.QUEUED, ProbeRun.Status.RUNNING)
    pending = ProbeRun.objects.filter(server=server, trigger=ProbeRun.Trigger.CONFIRMATION, status__in=waiting)
    if pending.exists():
        return None  # one confirmation at a time per server
    try:
        with transaction.atomic():
            confirmation = ProbeRun.objects.create(
                server=server, trigger=ProbeRun.Trigger.CONFIRMATION, confirms=run, plan=run.plan
            )
    except IntegrityError:
        return None  # `confirms` is one-to-one: this suspect already has its confirmation
    if enqueue is None:
        from collectors.tasks import enqueue_probe as enqueue
    enqueue(server, confirmation)
    log.info("probe run %s looks worse than baseline; confirmation run %s queued", run.pk, confirmation.pk)
    return confirmation


def _after_failed_run(server: Server, run: ProbeRun, params: AlertParams) -> Evaluation:
    ev = Evaluation()
    recent = list(
        ProbeRun.objects.filter(server=server, status__in=(ProbeRun.Status.SUCCEEDED, ProbeRun.Status.FAILED))
        .order_by("-queued_at", "-pk")[: params.unreachable_after]
    )
    if len(recent) == params.unreachable_after and all(r.status == ProbeRun.Status.FAILED for r in recent):
        alert = open_alert(server, Alert.Kind.UNREACHABLE, confirming_runs=recent,
                           note=f"{len(recent)} probe runs in a row failed; last: {run.error}"[:2000])
        if alert is not None:
            ev.opened.append(alert)
    return ev
