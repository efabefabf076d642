"""`manage.py probe SERVER` — probe one server now, in this process, store the run, print the table."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.models import ProbeRun, Server
from collectors.probing import ProbeFailed, run_probe_for_server

COLUMNS = [
    ("kind", "kind", "{}"), ("context", "ctx", "{}"), ("output_len", "out", "{}"), ("repeat", "rep", "{}"),
    ("decode_tps", "decode tok/s", "{:.1f}"), ("ttft_s", "TTFT s", "{:.3f}"), ("e2e_s", "e2e s", "{:.3f}"),
    ("streamed_tps", "stream tok/s", "{:.1f}"), ("tokens_per_chunk", "tok/chunk", "{:.2f}"),
    ("tau_response", "tau", "{:.2f}"),
]


def format_table(run: ProbeRun) -> str:
    rows = [[title for _, title, _ in COLUMNS]]
    for m in run.measurements.order_by("kind", "context", "output_len", "repeat"):
        rows.append(["-" if getattr(m, f) is None else fmt.format(getattr(m, f)) for f, _, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    tau = f"tau from counters {run.tau_counters}, from responses {run.tau_responses}"
    flag = f"CONTAMINATED: {run.contamination_reason}" if run.contaminated else "not contaminated"
    return "\n".join([*lines, tau, flag])


class Command(BaseCommand):
    help = "Probe one server (by name or id) synchronously; store the run and print its measurements."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("server", help="server name or id")

    def handle(self, *args: Any, **opts: Any) -> None:
        key = opts["server"]
        server = Server.objects.filter(name=key).first() or (
            Server.objects.filter(pk=int(key)).first() if key.isdigit() else None
        )
        if server is None:
            raise CommandError(f"no server named {key!r}")

        def progress(step: str) -> None:
            print(f"  {step}", file=sys.stderr, flush=True)

        try:
            run = run_probe_for_server(server.pk, ProbeRun.Trigger.MANUAL, progress=progress)
        except ProbeFailed as failed:
            raise CommandError(f"probe run {failed.run.pk} failed: {failed.run.error}") from None
        if run.status != ProbeRun.Status.SUCCEEDED:
            raise CommandError(f"probe run {run.pk} {run.status}: {run.error}")
        self.stdout.write(f"probe run {run.pk} of {server.name} ({server.base_url}) succeeded\n")
        self.stdout.write(format_table(run))
