"""Prometheus metrics of the engine, all under the `ddtree:` prefix (DESIGN §7.5).

Every series carries the labels `model_name` and `algorithm`. The model loop is the only writer:
it records a request in one step after the generation ends and before the client hears of it, so
a client that reads `/metrics` after its response sees counters that include its own request.
"""

from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from engine.stats import STAGES, GenerationStats

# `*_created` samples double the size of /metrics and nobody reads them (vLLM turns them off too).
disable_created_metrics()

PREFIX = "ddtree:"
ACCEPT_WINDOW_ROUNDS = 256  # the gauge spec_accept_length is the mean τ over this many recent rounds
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                   20.0, 40.0, 80.0)
ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
STAGE_BUCKETS = (1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
ACCEPT_BUCKETS = (*range(1, 17), 24, 32, 48, 64)


class EngineMetrics:
    """The `ddtree:` series on a registry of their own (no process/platform collectors mixed in)."""

    def __init__(self, model_name: str, algorithm: str) -> None:
        self.registry = CollectorRegistry()
        self.labels = {"model_name": model_name, "algorithm": algorithm}
        names = list(self.labels)
        r = self.registry

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(PREFIX + name, doc, [*names, *extra], registry=r)

        def histogram(name: str, doc: str, buckets: tuple[float, ...], extra: tuple[str, ...] = ()) -> Histogram:
            return Histogram(PREFIX + name, doc, [*names, *extra], buckets=buckets, registry=r)

        # prometheus_client appends `_total` to counter names itself.
        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens of requests that reached the model loop.")
        self.generation_tokens = counter("generation_tokens", "Completion tokens returned to clients.")
        self.requests = counter("requests", "Finished requests by reason (stop, length, cancelled, error).",
                                ("finished_reason",))
        self.num_drafts = counter("spec_decode_num_drafts", "Verify passes (speculative rounds) after prefill.")
        self.num_draft_tokens = counter("spec_decode_num_draft_tokens", "Drafted tokens (tree nodes) verified.")
        self.num_accepted = counter("spec_decode_num_accepted_tokens", "Drafted tokens the target accepted.")
        self.accepted_per_pos = counter("spec_decode_num_accepted_tokens_per_pos",
                                        "Rounds that accepted a drafted token at this depth (position 0 = depth 1).",
                                        ("position",))
        g = {"labelnames": names, "registry": r}
        self.running = Gauge(PREFIX + "num_requests_running", "Requests on the model loop (0 or 1).", **g)
        self.waiting = Gauge(PREFIX + "num_requests_waiting", "Requests queued behind the running one.", **g)
        self.kv_usage = Gauge(PREFIX + "kv_cache_usage_perc",
                              "Fraction (0..1) of the max context held by the running sequence.", **g)
        self.accept_length = Gauge(PREFIX + "spec_accept_length",
                                   f"Mean tokens per verify pass (τ) over the last {ACCEPT_WINDOW_ROUNDS} rounds.", **g)
        self.accept_per_round = histogram("spec_accept_length_per_round", "τ of each verify pass.", ACCEPT_BUCKETS)
        self.ttft = histogram("time_to_first_token_seconds", "Arrival to first token, queueing included.",
                              LATENCY_BUCKETS)
        self.itl = histogram("inter_token_latency_seconds", "Time between tokens (a round shares its time).",
                             ITL_BUCKETS)
        self.e2e = histogram("e2e_request_latency_seconds", "Arrival to last token.", LATENCY_BUCKETS)
        self.round_stage = histogram("round_stage_seconds", "Seconds per round in each decode stage.", STAGE_BUCKETS,
                                     ("stage",))
        self._window: deque[int] = deque(maxlen=ACCEPT_WINDOW_ROUNDS)
        self._lock = threading.Lock()
        # Touch the unlabelled-by-request series so they show up (at 0) before the first request.
        for c in (self.prompt_tokens, self.generation_tokens, self.num_drafts, self.num_draft_tokens,
                  self.num_accepted):
            c.labels(**self.labels)
        for gauge in (self.running, self.waiting, self.kv_usage, self.accept_length):
            gauge.labels(**self.labels).set(0)

    # -- written by the model loop and the queue ---------------------------------------------

    def set_queue(self, running: int, waiting: int) -> None:
        self.running.labels(**self.labels).set(running)
        self.waiting.labels(**self.labels).set(waiting)

    def set_kv_usage(self, fraction: float) -> None:
        self.kv_usage.labels(**self.labels).set(fraction)

    def first_token(self, seconds: float) -> None:
        self.ttft.labels(**self.labels).observe(seconds)

    def inter_token(self, seconds: float, tokens: int) -> None:
        """A round's `tokens` arrive together; each is charged its share of the round's time."""
        h = self.itl.labels(**self.labels)
        for _ in range(tokens):
            h.observe(seconds / tokens)

    def finished(self, reason: str, *, prompt_tokens: int = 0, completion_tokens: int = 0,
                 stats: GenerationStats | None = None, e2e_seconds: float | None = None) -> None:
        lab = self.labels
        self.requests.labels(**lab, finished_reason=reason).inc()
        self.prompt_tokens.labels(**lab).inc(prompt_tokens)
        self.generation_tokens.labels(**lab).inc(completion_tokens)
        if e2e_seconds is not None:
            self.e2e.labels(**lab).observe(e2e_seconds)
        if stats is None:
            return
        self.num_drafts.labels(**lab).inc(stats.rounds)
        self.num_draft_tokens.labels(**lab).inc(stats.drafted_nodes)
        self.num_accepted.labels(**lab).inc(stats.accepted_drafts)
        for depth, rounds in enumerate(stats.accepted_per_depth):
            self.accepted_per_pos.labels(**lab, position=str(depth)).inc(rounds)
        per_round = self.accept_per_round.labels(**lab)
        for tau in stats.accept_lengths:
            per_round.observe(tau)
        stage_hists = [self.round_stage.labels(**lab, stage=s) for s in STAGES]
        for seconds in stats.round_stage_seconds:
            for h, sec in zip(stage_hists, seconds, strict=True):
                h.observe(sec)
        with self._lock:
            self._window.extend(stats.accept_lengths)
            if self._window:
                self.accept_length.labels(**lab).set(sum(self._window) / len(self._window))
