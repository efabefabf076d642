"""The probe methodology (DESIGN §4) as plain functions, and `run_probe` that chains them.

`run_probe(client, plan)`:
  1. fingerprint the server; clamp the plan to its max context;
  2. scrape /metrics (A): load before, counter baseline;
  3. warm up (a few tokens), so first-request costs (allocations, graph capture) stay out of the data;
  4. per context, `repeats` two-point pairs: same canary, own salts, max_tokens N1 then N2;
     decode tok/s = (N2 − N1) / (t2 − t1): prefill, TTFT and fixed overheads cancel;
  5. output sweep at a short context: pairs (N1, L) for each output length L;
  6. scrape (B): counter deltas A→B cover exactly the non-streamed requests of steps 3–5, whose
     response fields are summed too: τ from counters vs τ from responses;
  7. streaming check (after B, since streamed answers carry no per-request speculative fields);
  8. scrape (C), waiting briefly for our own request to leave the gauges: load after; the request
     counter must have grown by exactly the requests we sent, else other traffic overlapped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from engine_client.canary import CANARY_VERSION
from engine_client.client import EngineClient
from engine_client.exceptions import StatusError
from engine_client.metrics import Snapshot, Window, parse_metrics, window
from engine_client.plan import ProbePlan
from engine_client.prompts import PromptBuilder
from engine_client.report import Measurement, ProbeReport, percentile
from engine_client.responses import Completion

__all__ = ["ProbeSession", "acceptance", "run_probe", "scrape", "stream_check", "two_point"]

Progress = Callable[[str], None]
SETTLE_TIMEOUT_S = 2.0  # how long the after-scrape waits for our own request to leave the running gauge


class ProbeSession:
    """Sends a probe's requests (T = 0, ignore_eos, fixed seed) and keeps every answer for the acceptance check."""

    def __init__(self, client: EngineClient, plan: ProbePlan, report: ProbeReport) -> None:
        self.client, self.plan, self.report = client, plan, report
        self.responses: list[Completion] = []  # non-streamed answers inside the acceptance window
        self.last_long: dict[int, tuple[str, Completion]] = {}  # context → (prompt, answer) of the last N2 request

    def complete(self, prompt: str, max_tokens: int, *, stream: bool = False) -> Completion:
        c = self.client.complete(prompt, max_tokens=max_tokens, temperature=0.0, seed=self.plan.seed,
                                 ignore_eos=True, stream=stream)
        self.report.requests_sent += 1
        if not stream:
            self.responses.append(c)
        if c.cached_tokens and "prefix_cache_hit" not in self.report.flags:
            # The salt should make every prefill cold; a hit means t2 − t1 may be too small.
            self.report.flags.append("prefix_cache_hit")
            self.report.notes.append(f"the server reported {c.cached_tokens} cached prompt tokens")
        return c

    def prompt_builder(self) -> PromptBuilder:
        if self.client.tokenize("probe") is not None:
            return PromptBuilder(lambda text: len(self.client.tokenize(text) or []), tokenizer_backed=True)

        def calibrate(text: str) -> int:
            try:
                c = self.complete(text, 1)
            except StatusError as e:
                if e.status_code == 400:  # prompt longer than the server's limit
                    raise ValueError(str(e)) from e
                raise
            if c.prompt_tokens is None:
                raise RuntimeError("the server reports no usage.prompt_tokens: cannot calibrate prompt lengths")
            return c.prompt_tokens

        return PromptBuilder(calibrate, tokenizer_backed=False)


def scrape(client: EngineClient) -> Snapshot | None:
    """/metrics parsed, or None when the server has none (then no load guard and no counter τ)."""
    try:
        return parse_metrics(client.metrics_text())
    except StatusError as e:
        if e.status_code in (401, 403, 404):
            return None
        raise


def _tau(responses: list[Completion]) -> tuple[float | None, int, int | None]:
    """(τ, steps, accepted) summed over answers that carry speculative fields (see `acceptance`)."""
    specs = [(c, c.spec) for c in responses if c.spec is not None and c.spec.steps]
    if not specs:
        return None, 0, None
    steps = sum(s.steps or 0 for _, s in specs)
    if all(s.source == "sglang" for _, s in specs) and all(c.completion_tokens is not None for c, _ in specs):
        # SGLang's counter formula: one token per request comes from prefill, not from a verify step.
        gen = sum(c.completion_tokens or 0 for c, _ in specs)
        return (gen - len(specs)) / steps, steps, None
    if all(s.accepted is not None for _, s in specs):
        accepted = sum(s.accepted or 0 for _, s in specs)
        return 1.0 + accepted / steps, steps, accepted
    if all(s.tau is not None for _, s in specs):
        return sum((s.tau or 0) * (s.steps or 0) for _, s in specs) / steps, steps, None
    return None, steps, None


def two_point(session: ProbeSession, builder: PromptBuilder, context: int, n1: int, n2: int, repeat: int,
              kind: str = "two_point") -> Measurement:
    """One pair: the same canary (own salts) with max_tokens n1 then n2; decode tok/s = (n2 − n1) / (t2 − t1)."""
    p1, p2 = builder.build(context), builder.build(context)
    a = session.complete(p1.text, n1)
    b = session.complete(p2.text, n2)
    session.last_long[context] = (p2.text, b)
    m = Measurement(kind=kind, context=context, output_len=n2, repeat=repeat, n1=n1, n2=n2, t1=a.e2e_s, t2=b.e2e_s,
                    e2e_s=b.e2e_s, prompt_tokens=b.prompt_tokens, cached_tokens=max(a.cached_tokens or 0,
                                                                                     b.cached_tokens or 0))
    dt = b.e2e_s - a.e2e_s
    m.decode_tps = (n2 - n1) / dt if dt > 0 else None  # noise can invert a too-short pair: keep it, unrated
    m.tau_response = _tau([a, b])[0]
    d1, d2 = (a.spec.decode_s if a.spec else None), (b.spec.decode_s if b.spec else None)
    if d1 is not None and d2 is not None:
        m.server_decode_s = d2 - d1
        m.server_decode_tps = (n2 - n1) / m.server_decode_s if m.server_decode_s > 0 else None
    return m


def stream_check(session: ProbeSession, builder: PromptBuilder, context: int, max_tokens: int,
                 two_point_tps: float | None) -> tuple[Measurement, dict[str, object]]:
    """The last N2 request at `context`, streamed again: its rate, inter-chunk gaps and tokens per chunk.

    The streamed rate is compared with the server-side decode rate of the streamed request itself, when the
    stream's last chunk reports it (our engine does: the transport is then the only difference, whatever the
    server's speed from one request to the next); else with that of the non-streamed twin, which at T = 0
    produces the same tokens; else, when the server reports no decode time, with the two-point rate.
    Prefix caching cannot bias this: the streamed rate runs from the first to the last token chunk and
    excludes the prefill.
    """
    prompt, twin = session.last_long.get(context) or ("", None)
    if twin is None or twin.completion_tokens != max_tokens:
        prompt = builder.build(context).text
        twin = session.complete(prompt, max_tokens)
    c = session.complete(prompt, max_tokens, stream=True)
    chunks = [ch for ch in c.chunks if ch.text or (ch.tokens or 0) > 0]
    total = c.completion_tokens if c.completion_tokens is not None else max_tokens  # ignore_eos: all of them
    known = all(ch.tokens is not None for ch in chunks)
    per_chunk = (sum(ch.tokens or 0 for ch in chunks) / len(chunks) if known else total / len(chunks)) \
        if chunks else None
    gaps = [b.t_s - a.t_s for a, b in zip(chunks, chunks[1:], strict=False)]
    m = Measurement(kind="stream", context=context, output_len=max_tokens, repeat=0, ttft_s=c.first_token_s,
                    e2e_s=c.e2e_s, tokens_per_chunk=per_chunk, prompt_tokens=c.prompt_tokens,
                    chunk_gap_mean_s=statistics.fmean(gaps) if gaps else None, chunk_gap_p95_s=percentile(gaps, 0.95))
    if len(chunks) > 1 and per_chunk:
        first_tokens = chunks[0].tokens if known else per_chunk
        span = chunks[-1].t_s - chunks[0].t_s
        m.streamed_tps = (total - (first_tokens or 0)) / span if span > 0 else None
    server_tps, source = None, "two_point"
    for name, timed in (("stream_server_decode", c), ("server_decode", twin)):
        if timed.spec is not None and timed.spec.decode_s and timed.completion_tokens:
            # The server's decode time runs from the first token to the last: completion − 1 tokens.
            server_tps, source = (timed.completion_tokens - 1) / timed.spec.decode_s, name
            break
    reference = server_tps or two_point_tps
    ratio = m.streamed_tps / reference if m.streamed_tps and reference else None
    artefact = ratio is not None and abs(1 - ratio) > session.plan.stream_gap
    if total > 1 and (len(chunks) <= 1 or chunks[-1].t_s <= chunks[0].t_s):
        artefact = True  # the whole answer arrived at once: something buffered the stream
    verdict = {"streamed_tps": m.streamed_tps, "two_point_tps": two_point_tps, "server_tps": server_tps,
               "reference": source, "ratio": ratio,
               "chunks": len(chunks), "tokens_per_chunk": per_chunk, "chunk_gap_mean_s": m.chunk_gap_mean_s,
               "chunk_gap_p95_s": m.chunk_gap_p95_s, "ttft_s": m.ttft_s, "transport_artefact": artefact}
    return m, verdict


def acceptance(win: Window | None, responses: list[Completion], tolerance: float) -> dict[str, object]:
    """τ over the probe window from counter deltas and from response fields, and whether they agree."""
    tau_r, steps_r, accepted_r = _tau(responses)
    complete = all(c.spec is not None for c in responses)
    out: dict[str, object] = {
        "tau_counters": win.tau if win else None, "tau_source": win.tau_source if win else None,
        "tau_responses": tau_r, "accepted": win.accepted if win else accepted_r,
        "drafted": win.drafted if win else None, "steps": win.steps if win else steps_r,
        "acceptance_rate": win.acceptance_rate if win else None,
        "per_position_rate": {str(k): v for k, v in win.per_position_rate.items()} if win else {},
        "response_steps": steps_r, "responses_with_spec": complete, "reset": win.reset if win else None,
        "agree": None,
    }
    if win and win.tau is not None and tau_r is not None and complete:
        out["agree"] = abs(win.tau - tau_r) <= tolerance * tau_r
    return out


def _settled(client: EngineClient, first: Snapshot) -> Snapshot:
    """Scrape until the gauges drop our own just-finished request (engines update them after answering)."""
    snap, deadline = first, time.monotonic() + SETTLE_TIMEOUT_S
    while (snap.running or snap.waiting) and time.monotonic() < deadline:
        time.sleep(0.02)
        snap = scrape(client) or snap
    return snap


def run_probe(client: EngineClient, plan: ProbePlan | None = None, progress: Progress | None = None) -> ProbeReport:
    """Run `plan` against `client`'s server (steps 1–8 of the module docstring)."""
    plan = plan or ProbePlan()
    say = progress or (lambda step: None)
    report = ProbeReport(url=client.base_url, started_at=time.time(), canary_version=CANARY_VERSION)
    say("fingerprint")
    report.fingerprint = client.fingerprint()
    plan = plan.clamped(report.fingerprint.get("max_context"))
    report.plan, report.notes = plan.to_dict(), [*report.notes, *plan.notes]
    session = ProbeSession(client, plan, report)

    say("scrape before")
    before = scrape(client)
    if before is None:
        report.notes.append("no /metrics: no load guard and no τ from counters")
    else:
        report.load_before = before.load
        if before.running or before.waiting:
            report.contaminate(f"server busy before the probe (running {before.running:g}, "
                               f"waiting {before.waiting or 0:g})")

    if plan.warmup_tokens:
        say("warm-up")
        session.complete("Warm-up. " + "The harbour office opened at six.", plan.warmup_tokens)
    say("prompts: " + ("tokenize endpoint" if client.tokenize("probe") is not None else "calibration"))
    builder = session.prompt_builder()

    for c in plan.contexts:
        for r in range(plan.repeats):
            say(f"two-point: context {c}, N {plan.n1}/{plan.n2}, repeat {r + 1}/{plan.repeats}")
            report.measurements.append(two_point(session, builder, c, plan.n1, plan.n2, r))
    for out_len in plan.outputs:
        for r in range(plan.repeats):
            say(f"output sweep: {out_len} tokens at context {plan.output_context}, repeat {r + 1}/{plan.repeats}")
            report.measurements.append(two_point(session, builder, plan.output_context, plan.n1, out_len, r,
                                                 kind="output_sweep"))

    say("scrape after")
    mid = scrape(client) if before is not None else None
    win = window(before, mid) if before is not None and mid is not None else None
    report.acceptance = acceptance(win, session.responses, plan.tau_tolerance)
    if report.acceptance["agree"] is False:
        report.flags.append("tau_disagreement")

    if plan.stream_check:
        say(f"stream check: context {plan.contexts[0]}, {plan.n2} tokens")
        m, verdict = stream_check(session, builder, plan.contexts[0], plan.n2,
                                  report.median_decode_tps(plan.contexts[0]))
        report.measurements.append(m)
        report.stream = verdict
        if verdict["transport_artefact"]:
            report.flags.append("transport_artefact")

    if before is not None:
        after = scrape(client)
        if after is not None:
            after = _settled(client, after)
            report.load_after = after.load
            if after.running or after.waiting:
                report.contaminate(f"server busy after the probe (running {after.running:g}, "
                                   f"waiting {after.waiting or 0:g})")
            whole = window(before, after)
            if whole.reset:
                report.flags.append("counter_reset")
                report.contaminate("the server restarted during the probe (a counter went down)")
            elif whole.requests is not None and whole.requests > report.requests_sent:
                report.contaminate(f"{whole.requests - report.requests_sent:g} other request(s) finished on the "
                                   f"server during the probe")
    report.finished_at = time.time()
    say("done")
    return report
