"""The FIFO queue and the one thread that runs the model.

The decoder owns its KV caches, so generations must never overlap: every request becomes a `Job`
on a bounded deque, and a single model-loop thread takes jobs in arrival order. The loop talks
back to the request's event loop only through `call_soon_threadsafe`, with the events
  ("progress", tokens)   after prefill and every round, streaming jobs only;
  ("done", JobResult)    after the metrics have recorded the request;
  ("error", exception)   the request failed; the loop goes on with the next job.
A job whose client went away is cancelled: skipped if still queued, stopped at the next round
(`on_progress` returns False) if running.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from engine.server.metrics import EngineMetrics

if TYPE_CHECKING:  # torch stays out of the import path until the model loads
    from engine.decode import Decoder, Generation
    from engine.sampling import SamplingParams

log = logging.getLogger("engine.server")
DISCONNECT_POLL_S = 0.1  # how often a waiting handler checks whether its client is still there


class QueueFull(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the request queue is full; retry in {retry_after} s")
        self.retry_after = retry_after


@dataclass
class JobResult:
    generation: Generation
    queue_seconds: float  # arrival → start on the model loop
    e2e_seconds: float  # arrival → last token


@dataclass
class Job:
    prompt_ids: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    stream: bool = False
    arrival: float = field(default_factory=time.perf_counter)
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancelled.set()

    def post(self, kind: str, payload: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, payload))
        except RuntimeError:  # the event loop is gone (shutdown); nobody is listening
            pass


class ModelWorker:
    """Admits jobs (one running + `max_waiting` queued) and runs them one at a time."""

    def __init__(self, metrics: EngineMetrics, max_waiting: int) -> None:
        self.metrics = metrics
        self.max_waiting = max_waiting
        self.decoder: Decoder | None = None
        self._queue: deque[Job] = deque()
        self._running = 0
        self._stopping = False
        self._cond = threading.Condition()
        self._recent_e2e: deque[float] = deque(maxlen=16)
        self._thread: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def start(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self._thread = threading.Thread(target=self._loop, name="model-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            for job in self._queue:
                job.cancel()
            self._cond.notify_all()

    def submit(self, job: Job) -> None:
        with self._cond:
            if len(self._queue) + self._running > self.max_waiting:
                raise QueueFull(self._retry_after())
            self._queue.append(job)
            self.metrics.set_queue(self._running, len(self._queue))
            self._cond.notify()

    def _retry_after(self) -> int:
        """Seconds until a slot is likely free: the recent mean request time times the jobs ahead."""
        mean = sum(self._recent_e2e) / len(self._recent_e2e) if self._recent_e2e else 1.0
        return max(1, min(60, math.ceil(mean * (len(self._queue) + self._running))))

    # -- the model-loop thread -----------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                job = self._queue.popleft()
                self._running = 1
                self.metrics.set_queue(1, len(self._queue))
            try:
                self._run(job)
            except Exception:  # a bug in the bookkeeping must not kill the only model thread
                log.exception("model loop: unexpected error")
            finally:
                with self._cond:
                    self._running = 0
                    self.metrics.set_queue(0, len(self._queue))
                self.metrics.set_kv_usage(0.0)

    def _run(self, job: Job) -> None:
        from engine.decode import RequestError

        assert self.decoder is not None
        decoder = self.decoder
        if job.cancelled.is_set():
            self.metrics.finished("cancelled")
            job.post("error", RequestError("cancelled before it started"))
            return
        started = time.perf_counter()
        last = {"time": started, "count": 0}
        prompt_len = len(job.prompt_ids)

        def on_progress(tokens: list[int]) -> bool:
            # Called after prefill and after every round: first-token and inter-token latency, cache use.
            now, n = time.perf_counter(), len(tokens)
            if last["count"] == 0 and n > 0:
                self.metrics.first_token(now - job.arrival)
            elif n > last["count"]:
                self.metrics.inter_token(now - last["time"], n - last["count"])
            if n > last["count"]:
                last["time"], last["count"] = now, n
            self.metrics.set_kv_usage(min(1.0, (prompt_len + n) / decoder.max_context))
            if job.stream:
                job.post("progress", list(tokens))
            return not job.cancelled.is_set()

        try:
            gen = decoder.generate(job.prompt_ids, job.params, on_progress=on_progress)
        except Exception as e:
            if not isinstance(e, RequestError):
                log.exception("generation failed")
            self.metrics.finished("error")
            job.post("error", e)
            return
        end = time.perf_counter()
        self._recent_e2e.append(end - started)
        # Record before telling the client, so its next /metrics read already includes this request.
        self.metrics.finished(gen.finish_reason, prompt_tokens=gen.prompt_tokens, completion_tokens=len(gen.tokens),
                              stats=gen.stats, e2e_seconds=end - job.arrival)
        job.post("done", JobResult(gen, started - job.arrival, end - job.arrival))


async def job_events(job: Job, request: Request) -> AsyncIterator[tuple[str, Any]]:
    """The job's events until done or error; if the client disconnects first, cancel the job and stop."""
    getter: asyncio.Future[tuple[str, Any]] | None = None
    try:
        while True:
            if getter is None:
                getter = asyncio.ensure_future(job.events.get())
            done, _ = await asyncio.wait({getter}, timeout=DISCONNECT_POLL_S)
            if not done:
                if await request.is_disconnected():
                    return
                continue
            event, getter = getter.result(), None
            yield event
            if event[0] != "progress":
                return
    finally:
        if getter is not None:
            getter.cancel()
        job.cancel()  # harmless once done; stops the model loop at its next round otherwise
