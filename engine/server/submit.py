"""From a validated body to a queued job: limits checked up front, so a bad request never waits.

1. the prompt is tokenized (or taken as ids) and checked against the max context;
2. max_tokens is checked against what the context leaves (None means "all of it");
3. the sampling parameters are validated by the engine's own rules;
4. the job joins the queue, or the client gets 503 + Retry-After when it is full.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from engine.server.errors import APIError
from engine.server.state import ServerState
from engine.server.worker import Job, JobResult, QueueFull, job_events

if TYPE_CHECKING:
    from engine.decode import Decoder
    from engine.sampling import SamplingParams


# Below this a temperature means greedy decoding (as in vLLM): x / 1e-38 is inf and the probabilities NaN.
MIN_TEMPERATURE = 1e-5


def stop_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def check_prompt(decoder: Decoder, ids: list[int]) -> None:
    """The engine's own prompt rules, applied before queueing."""
    from engine.decode import RequestError

    try:
        decoder.check_prompt(ids)
    except RequestError as e:
        code = "context_length_exceeded" if len(ids) >= decoder.max_context else None
        raise APIError(400, str(e), param="prompt", code=code) from None


def sampling_params(decoder: Decoder, prompt_len: int, *, max_tokens: int | None, param: str, temperature: float,
                    top_p: float, top_k: int, seed: int | None, stop: list[str], ignore_eos: bool) -> SamplingParams:
    from engine.sampling import SamplingParams

    room = decoder.max_context - prompt_len
    if max_tokens is None:
        max_tokens = room
    if max_tokens < 1:
        raise APIError(400, f"{param} must be at least 1 (got {max_tokens})", param=param)
    if max_tokens > room:
        raise APIError(400, f"{param}={max_tokens} is too large: the prompt has {prompt_len} tokens and the max "
                       f"context is {decoder.max_context}, so at most {room} can be generated", param=param,
                       code="context_length_exceeded")
    if temperature < MIN_TEMPERATURE:
        temperature = 0.0  # greedy: dividing the logits by a tinier temperature overflows them (found by fuzzing)
    params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_k=max(top_k, 0), top_p=top_p,
                            seed=seed, stop=stop, ignore_eos=ignore_eos)
    try:
        params.validate()
    except ValueError as e:
        raise APIError(400, str(e)) from None
    return params


def submit(state: ServerState, prompt_ids: list[int], params: SamplingParams, *, stream: bool) -> Job:
    job = Job(prompt_ids, params, asyncio.get_running_loop(), stream=stream)
    try:
        state.worker.submit(job)
    except QueueFull as e:
        raise APIError(503, str(e), headers={"Retry-After": str(e.retry_after)}, code="queue_full") from None
    return job


def raise_for(error: Exception) -> None:
    from engine.decode import RequestError

    if isinstance(error, RequestError):
        raise APIError(400, str(error))
    raise APIError(500, f"generation failed: {type(error).__name__}: {error}")


async def wait_result(job: Job, request: Request) -> JobResult | None:
    """The finished generation, or None when the client went away (the job is then cancelled)."""
    async for kind, payload in job_events(job, request):
        if kind == "done":
            return payload
        if kind == "error":
            raise_for(payload)
    return None


def spec_summary(result: JobResult) -> dict[str, Any]:
    """The per-request speculative statistics sent with non-streaming responses (`spec`)."""
    s = result.generation.stats
    return {
        "algorithm": s.algorithm,
        "budget": s.budget,
        "block_size": s.block_size,
        "verify_steps": s.rounds,
        "tau": s.tau,
        "accept_length_histogram": s.histogram(),
        "accepted_per_depth": s.accepted_per_depth,
        "drafted_tokens": s.drafted_nodes,
        "accepted_tokens": s.accepted_drafts,
        "stage_seconds": dict(s.stage_seconds),
        "prefill_seconds": s.prefill_seconds,
        "decode_seconds": s.decode_seconds,
        "queue_seconds": result.queue_seconds,
        "e2e_seconds": result.e2e_seconds,
    }
