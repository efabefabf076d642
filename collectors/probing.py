"""Probe runs (DESIGN §3 step 3, §4): lock the server, scrape before, run engine_client's probe,
scrape after, store the run with its measurements.

1. Find or create the ProbeRun row (queued).
2. Take the per-server lock (renewed while held); if another probe holds it, the run is `skipped` with
   that reason — or, for a redelivered run that is still `running`, `ServerBusy` (ask again later).
3. Claim the run with a conditional UPDATE queued → running; zero rows changed = another worker
   already has it (a redelivered message), so stop. A run found `running` while we hold the lock was
   claimed by a worker that died (SIGKILL, OOM, lost database): it becomes `failed` ("worker lost")
   and its one replacement run (`retry_of`) runs here instead (collectors/FAULTS.md).
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
from collectors.locks import remaining_s, server_lock
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


# The error of a run whose worker died mid-probe; FAULTS.md documents the contract.
WORKER_LOST = "worker lost: the process running this probe stopped (killed, out of memory or cut off from the database)"


class ServerBusy(Exception):
    """A redelivered run is still `running` and the server's lock is held: its worker may be alive."""

    def __init__(self, run: ProbeRun, retry_in_s: float) -> None:
        super().__init__(f"probe run {run.pk} is running and server {run.server_id} is locked")
        self.run = run
        self.retry_in_s = retry_in_s


def lock_ttl_s() -> float:
    # Renewed every third of this while the probe runs (locks.Lock.keep_alive), so a worker killed by the
    # hard time limit or the OOM killer frees the server this long after it died, however long probes are.
    return settings.SPECTATOR_PROBE_LOCK_TTL


def replace_lost_run(run: ProbeRun) -> ProbeRun | None:
    """A `running` run nobody runs any more (its worker died) → `failed` (WORKER_LOST) plus one queued
    replacement linked by `retry_of`, returned. None if another process got there first (the conditional
    UPDATE changed nothing), or if this run was itself the replacement of a lost run: a probe that kills
    its worker twice in a row is not tried a third time."""
    now = timezone.now()
    step = ProbeRun.objects.filter(pk=run.pk).values_list("current_step", flat=True).first() or ""
    previous = run.retry_of
    twice = previous is not None and previous.error.startswith(WORKER_LOST)
    error = WORKER_LOST + ("; lost twice in a row, not retried" if twice else "")
    with transaction.atomic():
        changed = ProbeRun.objects.filter(pk=run.pk, status=ProbeRun.Status.RUNNING).update(
            status=ProbeRun.Status.FAILED, finished_at=now, error=error, current_step=f"failed during: {step}"[:200]
        )
        if changed != 1 or twice:
            return None
        log.warning("probe run %s on server %s: %s; retrying it", run.pk, run.server_id, WORKER_LOST)
        confirms_id = run.confirms_id
        if confirms_id:  # one-to-one: the link moves to the replacement, as a retry's does (tasks.py)
            ProbeRun.objects.filter(pk=run.pk).update(confirms=None)
        return ProbeRun.objects.create(server_id=run.server_id, trigger=run.trigger, plan=run.plan,
                                       requested_by_id=run.requested_by_id, confirms_id=confirms_id, retry_of=run)


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
    if run.status not in (ProbeRun.Status.QUEUED, ProbeRun.Status.RUNNING):
        return run  # a redelivered message for a run that already ran
    executed = False
    try:
        with server_lock(server.pk, lock_ttl_s(), renew=True) as lock:
            if not lock.acquired:
                if run.status == ProbeRun.Status.RUNNING:
                    raise ServerBusy(run, remaining_s(server.pk))
                _finish(run, ProbeRun.Status.SKIPPED, error="another probe is running on this server")
                return run
            run.refresh_from_db(fields=["status"])
            if run.status == ProbeRun.Status.RUNNING:
                # Whoever runs a probe holds this lock, and now we do: the worker that claimed it is dead.
                replacement = replace_lost_run(run)
                if replacement is None:
                    run.refresh_from_db()
                    return run
                run = replacement
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
