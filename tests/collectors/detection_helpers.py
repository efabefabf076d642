"""Stored probe runs with chosen numbers, for the detection and alert tests (no engine needed)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from collectors.models import ProbeMeasurement, ProbeRun, Server

# Deterministic ±1 % wiggle around a level, so baselines have a non-zero spread.
WIGGLE = (0.0, 0.01, -0.01, 0.005, -0.005, 0.008, -0.008, 0.002, -0.002, 0.0)


def stored_run(
    server: Server,
    tps: float,
    *,
    trigger: str = ProbeRun.Trigger.SCHEDULED,
    confirms: ProbeRun | None = None,
    tau: float | None = 3.0,
    status: str = ProbeRun.Status.SUCCEEDED,
    **fields: Any,
) -> ProbeRun:
    """A finished probe run whose two-point decode rate at context 64 is `tps`."""
    run = ProbeRun.objects.create(
        server=server, trigger=trigger, confirms=confirms, status=status, started_at=timezone.now(),
        finished_at=timezone.now(), tau_counters=tau, plan={"contexts": [64]}, **fields,
    )
    if status == ProbeRun.Status.SUCCEEDED:
        ProbeMeasurement.objects.create(run=run, kind="two_point", context=64, decode_tps=tps)
    return run


def baseline_runs(server: Server, level: float = 100.0, n: int = 10, noise: float = 1.0) -> list[ProbeRun]:
    """`n` runs at `level`, wiggling by up to ±`noise` %."""
    return [stored_run(server, level * (1 + noise * WIGGLE[i % len(WIGGLE)])) for i in range(n)]


class Enqueued(list):
    """Stands in for collectors.tasks.enqueue_probe: records (server, run) instead of publishing."""

    def __call__(self, server: Server, run: ProbeRun) -> None:
        self.append((server, run))
