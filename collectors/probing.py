"""Probe runs (DESIGN §3 step 3, §4): lock the server, scrape before, run engine_client's probe,
scrape after, store the run with its measurements.

1. Find or create the ProbeRun row (queued).
2. Take the per-server lock; if another probe holds it, the run is `skipped` with that reason.
3. Claim the run with a conditional UPDATE queued → running; zero rows changed = another worker
   already has it (a redelivered message), so stop.
4. Scrape, probe (progress → `current_step`), scrape; store; `succeeded`.
5. Any failure → `failed` with the reason; transient ones are re-raised for the task to retry.
6. With the lock released, detection runs on the finished run (collectors/alerts.py); its errors are
   logged and stored on the run, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from collectors import telemetry
from collectors.clients import clean, client_for, describe, is_client_error
from collectors.locks import server_lock
from collectors.models import ProbeMeasurement, ProbeRun, Server
from collectors.plans import effective_plan
from collectors.scraping import scrape_server

log = logging.getLogger(__name__)

MEASUREMENT_FIELDS = (
    "kind", "context", "output_len", "repeat", "n1", "n2", "t1", "t2", "decode_tps", "ttft_s", "e2e_s",
    "streamed_tps", "chunk_gap_mean_s", "chunk_gap_p95_s", "tokens_per_chunk", "tau_response", "server_decode_s",
    "server_decode_tps", "prompt_tokens", "cached_tokens",
)


class ProbeFailed(Exception):
    """A probe run ended `failed`; `transient` says whether trying again later may help."""

    def __init__(self, run: ProbeRun, transient: bool, cause: BaseException) -> None:
        super().__init__(run.error)
        self.run = run
        self.transient = transient
        self.cause = cause


def make_plan(plan: dict[str, Any]) -> Any:
    from engine_client.plan import ProbePlan

    full = effective_plan(plan)
    return ProbePlan.from_dict({**full, "contexts": tuple(full["contexts"]), "outputs": tuple(full["outputs"])})


def lock_ttl_s() -> float:
    # The hard time limit kills the task; the lock outlives it by a margin, then frees the server.
    return settings.SPECTATOR_PROBE_TIME_LIMIT + 120


def queue_run(server: Server, trigger: str, requested_by: Any = None) -> ProbeRun:
    return ProbeRun.objects.create(
        server=server, trigger=trigger, requested_by=requested_by, plan=effective_plan(server.probe_plan)
    )


def _finish(run: ProbeRun, status: str, **fields: Any) -> None:
    fields.update(status=status, finished_at=timezone.now())
    ProbeRun.objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    telemetry.probe_finished(run)


def run_probe_for_server(
    server_id: int,
    trigger: str = ProbeRun.Trigger.MANUAL,
    run_id: int | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> ProbeRun:
    server = Server.objects.get(pk=server_id)
    run = ProbeRun.objects.filter(pk=run_id).first() if run_id else queue_run(server, trigger)
    if run is None:
        raise ProbeRun.DoesNotExist(f"probe run {run_id} no longer exists")
    if run.status != ProbeRun.Status.QUEUED:
        return run  # a redelivered message for a run that already ran
    executed = False
    try:
        with server_lock(server.pk, lock_ttl_s()) as lock:
            if not lock.acquired:
                _finish(run, ProbeRun.Status.SKIPPED, error="another probe is running on this server")
                return run
            started = timezone.now()
            claimed = ProbeRun.objects.filter(pk=run.pk, status=ProbeRun.Status.QUEUED).update(
                status=ProbeRun.Status.RUNNING, started_at=started, current_step="starting"
            )
            if claimed != 1:
                run.refresh_from_db()
                return run
            run.status, run.started_at = ProbeRun.Status.RUNNING, started
            executed = True
            _execute(server, run, progress)
    finally:
        # After the lock is released, so a confirmation re-probe queued by detection can take it.
        if executed and run.status in (ProbeRun.Status.SUCCEEDED, ProbeRun.Status.FAILED):
            detect_after_run(run)
    return run


def detect_after_run(run: ProbeRun) -> None:
    """Step 6: regression detection and alerts (collectors/alerts.py). Never fails the run: an error is
    logged and kept on the run, because a bug in detection must not cost the measurements."""
    from collectors.alerts import after_probe_run

    try:
        after_probe_run(run)
    except Exception as exc:
        log.exception("detection after probe run %s failed", run.pk)
        run.detection_error = f"{type(exc).__name__}: {exc}"[:2000]
        ProbeRun.objects.filter(pk=run.pk).update(detection_error=run.detection_error)


def _execute(server: Server, run: ProbeRun, progress: Callable[[str], None] | None) -> None:
    from engine_client.probe import run_probe

    def on_progress(step: str) -> None:
        # One cheap UPDATE per step, so the UI (and a stuck-run investigation) sees where it is.
        ProbeRun.objects.filter(pk=run.pk).update(current_step=str(step)[:200])
        if progress:
            progress(step)

    client = client_for(server)
    try:
        scrape_server(server, client=client, raise_unreachable=True)
        report = run_probe(client, make_plan(run.plan or server.probe_plan), progress=on_progress)
        scrape_server(server, client=client)
        store_report(run, report.to_dict())
    except Exception as exc:
        transient = is_client_error(exc) and _transient(exc)
        reason = describe(exc, server.api_key)  # issue 8: the key blanked out of echoed server text
        log.warning("probe run %s on server %s failed: %s", run.pk, server.pk, reason)
        _finish(run, ProbeRun.Status.FAILED, error=reason, current_step=f"failed during: {_step(run)}")
        raise ProbeFailed(run, transient, exc) from exc
    finally:
        client.close()


def _transient(exc: BaseException) -> bool:
    from collectors.clients import is_transient

    return is_transient(exc)


def _step(run: ProbeRun) -> str:
    return ProbeRun.objects.filter(pk=run.pk).values_list("current_step", flat=True).first() or ""


def store_report(run: ProbeRun, report: dict[str, Any]) -> None:
    """Store a ProbeReport.to_dict() on the run and its measurements, and mark it succeeded."""
    acceptance = clean(report.get("acceptance") or {})
    measurements = [
        ProbeMeasurement(run=run, **{f: clean(m.get(f)) for f in MEASUREMENT_FIELDS if f in m})
        for m in report.get("measurements", [])
    ]
    with transaction.atomic():
        ProbeMeasurement.objects.bulk_create(measurements)
        _finish(
            run,
            ProbeRun.Status.SUCCEEDED,
            current_step="done",
            fingerprint=clean(report.get("fingerprint")),
            load_before=clean(report.get("load_before")),
            load_after=clean(report.get("load_after")),
            contaminated=bool(report.get("contaminated")),
            contamination_reason=str(report.get("contamination_reason") or "")[:500],
            tau_counters=acceptance.get("tau_counters"),
            tau_responses=acceptance.get("tau_responses"),
            acceptance=acceptance,
            flags=clean(report.get("flags") or []),
            summary=clean(report.get("summary")),
        )
