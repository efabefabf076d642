"""`python -m engine_client probe URL …`: run a probe against any server and print a table or JSON.

Exit status: 0 done (even if contaminated: the table says so), 1 the server failed us (unreachable,
errors), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from engine_client.client import EngineClient
from engine_client.constants import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_DEADLINE_S, DEFAULT_READ_TIMEOUT_S, DIALECTS
from engine_client.exceptions import EngineClientError
from engine_client.plan import ProbePlan
from engine_client.probe import run_probe
from engine_client.report import ProbeReport

__all__ = ["main"]


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine_client", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe", help="measure decode throughput, acceptance and streaming of one server")
    probe.add_argument("url", help="base URL of the server, e.g. http://127.0.0.1:30000")
    d = ProbePlan()
    probe.add_argument("--contexts", type=_ints, default=d.contexts, help="prompt lengths in tokens (64,1024,…)")
    probe.add_argument("--outputs", type=_ints, default=d.outputs, help="output sweep lengths (200,600,1200)")
    probe.add_argument("--repeats", type=int, default=d.repeats)
    probe.add_argument("--n1", type=int, default=d.n1, help="two-point pair: short member's max_tokens")
    probe.add_argument("--n2", type=int, default=d.n2, help="two-point pair: long member's max_tokens")
    probe.add_argument("--no-stream-check", action="store_true", help="skip the streaming check")
    probe.add_argument("--dialect", choices=DIALECTS, default="auto")
    probe.add_argument("--model", help="model name to send (servers with several models)")
    probe.add_argument("--api-key-env", metavar="VAR", help="read the API key from this environment variable")
    probe.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT_S)
    probe.add_argument("--read-timeout", type=float, default=DEFAULT_READ_TIMEOUT_S)
    probe.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, help="seconds for any one request, whole")
    probe.add_argument("--json", action="store_true", help="print the report as JSON")
    probe.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _f(v: Any, fmt: str = ".1f") -> str:
    return "—" if v is None else format(v, fmt)


def render(report: ProbeReport) -> str:
    """The human-readable table."""
    fp = report.fingerprint or {}
    lines = [f"Probe of {report.url}  ({fp.get('kind')}, model {_model(fp)}, version {fp.get('version')}, "
             f"fingerprint {fp.get('hash')}, canary {report.canary_version})", ""]
    lines.append("Decode throughput (two-point, non-streaming, T=0, ignore_eos)")
    lines.append(f"  {'context':>8}  {'tok/s median':>12}  {'± spread':>9}  {'n':>3}  {'server tok/s':>12}")
    for ctx, s in report.decode_by_context().items():
        server = [m.server_decode_tps for m in report.of_kind("two_point") if m.context == ctx and m.server_decode_tps]
        srv = sorted(server)[len(server) // 2] if server else None
        lines.append(f"  {ctx:>8}  {_f(s['median']):>12}  {_f(s['spread']):>9}  {s['n']:>3}  {_f(srv):>12}")
    if report.decode_by_output():
        lines += ["", "Output-length sweep (per-token rate should be flat)",
                  f"  {'output':>8}  {'tok/s median':>12}  {'± spread':>9}  {'n':>3}"]
        for out, s in report.decode_by_output().items():
            lines.append(f"  {out:>8}  {_f(s['median']):>12}  {_f(s['spread']):>9}  {s['n']:>3}")
    if report.stream:
        st = report.stream
        lines += ["", "Streaming check",
                  f"  streamed {_f(st['streamed_tps'])} tok/s vs {_f(st['server_tps'] or st['two_point_tps'])} tok/s "
                  f"({'server decode of the same request' if st['server_tps'] else 'two-point'}; ratio "
                  f"{_f(st['ratio'], '.2f')}); {st['chunks']} chunks, {_f(st['tokens_per_chunk'], '.2f')} "
                  f"tokens/chunk, gap mean {_f(_ms(st['chunk_gap_mean_s']))} ms, p95 "
                  f"{_f(_ms(st['chunk_gap_p95_s']))} ms, TTFT {_f(_ms(st['ttft_s']))} ms",
                  "  → " + ("TRANSPORT ARTEFACT: the stream does not show the server's rate (proxy, tunnel, buffering)"
                            if st["transport_artefact"] else "consistent: the stream shows the server's own rate")]
    a = report.acceptance
    lines += ["", "Acceptance over the probe window",
              f"  τ from counters {_f(a.get('tau_counters'), '.3f')}  τ from responses "
              f"{_f(a.get('tau_responses'), '.3f')}  agree: {a.get('agree')}  (steps {_f(a.get('steps'), '.0f')}, "
              f"accepted {_f(a.get('accepted'), '.0f')}, drafted {_f(a.get('drafted'), '.0f')}, rate "
              f"{_f(a.get('acceptance_rate'), '.3f')})"]
    lines += ["", f"Load before {_load(report.load_before)}, after {_load(report.load_after)}: "
              + (f"CONTAMINATED — {report.contamination_reason}" if report.contaminated else "clean")]
    if report.flags:
        lines.append("Flags: " + ", ".join(report.flags))
    lines += [f"Note: {n}" for n in report.notes]
    return "\n".join(lines)


def _model(fp: dict[str, Any]) -> Any:
    m = fp.get("model")
    return m.get("name") if isinstance(m, dict) else m


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000


def _load(load: dict[str, Any]) -> str:
    if not load:
        return "unknown"
    return f"running {_f(load.get('running'), 'g')} waiting {_f(load.get('waiting'), 'g')}"


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed its message
        return int(e.code or 0)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"error: environment variable {args.api_key_env} is not set", file=err)
            return 2
    try:
        plan = ProbePlan(contexts=args.contexts, outputs=args.outputs, repeats=args.repeats, n1=args.n1, n2=args.n2,
                         stream_check=not args.no_stream_check)
        client = EngineClient(args.url, api_key=api_key, dialect=args.dialect, model=args.model,
                              connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
                              deadline=args.deadline)
    except ValueError as e:
        print(f"error: {e}", file=err)
        return 2

    def progress(step: str) -> None:
        if not args.quiet:
            print(f"… {step}", file=err, flush=True)

    try:
        with client:
            report = run_probe(client, plan, progress=progress)
    except EngineClientError as e:
        print(f"error: probe of {client.base_url} failed: {e}", file=err)
        return 1
    except ValueError as e:  # the plan does not fit this server
        print(f"error: {e}", file=err)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else render(report), file=out)
    return 0
