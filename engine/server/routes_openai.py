"""OpenAI-compatible `/v1/models`, `/v1/completions` and `/v1/chat/completions`.

Our models are base models with no chat format, so chat messages go through one plain template
(`chat_prompt`):

    System: {content}\\n\\nUser: {content}\\n\\nAssistant: {content}\\n\\n … Assistant:

Streaming answers are SSE `data:` chunks ending with `data: [DONE]`; with
`stream_options.include_usage` a last chunk with empty `choices` carries `usage` and, as a
non-streaming answer does, our `spec` statistics (a probe compares the streamed rate with the
server's decode time of the same request).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from engine.server.errors import APIError, error_body
from engine.server.schemas import ChatCompletionRequest, ChatMessage, CompletionRequest
from engine.server.state import ServerState
from engine.server.streaming import DONE, TextStreamer, sse
from engine.server.submit import (
    check_prompt,
    sampling_params,
    spec_summary,
    stop_list,
    submit,
    wait_result,
)
from engine.server.worker import Job, JobResult, job_events

if TYPE_CHECKING:
    from engine.decode import Generation

router = APIRouter()
ROLE_NAMES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def chat_prompt(messages: list[ChatMessage]) -> str:
    parts = []
    for m in messages:
        content = m.content if isinstance(m.content, str) else "".join(p.text for p in m.content or [])
        parts.append(f"{ROLE_NAMES[m.role]}: {content}\n\n")
    return "".join(parts) + "Assistant:"


def _state(request: Request) -> ServerState:
    return request.app.state.server


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    state = _state(request)
    max_len = state.decoder.max_context if state.decoder is not None else None
    return {"object": "list", "data": [{"id": state.config.model_name, "object": "model", "created": state.started_at,
                                        "owned_by": "spectator", "max_model_len": max_len}]}


def _usage_and_spec(result: JobResult) -> dict[str, Any]:
    """A finished request's `usage` and our `spec` statistics, for its response or its stream's last chunk."""
    prompt, completion = result.generation.prompt_tokens, len(result.generation.tokens)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {"usage": usage, "spec": spec_summary(result)}


async def _non_streamed(job: Job, request: Request, head: dict[str, Any],
                        content: Callable[[Generation], dict[str, Any]]) -> Response:
    """One finished generation as an OpenAI response: `head` (id, object, created, model), one choice with
    `content(gen)`, usage, and our `spec` statistics; 499 when the client went away first."""
    result = await wait_result(job, request)
    if result is None:
        return Response(status_code=499)
    gen = result.generation
    choice = {"index": 0, **content(gen), "logprobs": None, "finish_reason": gen.finish_reason}
    return JSONResponse({**head, "choices": [choice], **_usage_and_spec(result)})


@router.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request) -> Response:
    state = _state(request)
    state.check_model(body.model)
    decoder = state.ready()
    prompt = body.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        if len(prompt) != 1:
            raise APIError(400, "one prompt per request (n = 1, batch of prompts not supported)", param="prompt")
        prompt = prompt[0]  # type: ignore[assignment]
    ids = decoder.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)  # type: ignore[arg-type]
    if isinstance(prompt, str) and not prompt:
        ids = []
    check_prompt(decoder, ids)
    stops = stop_list(body.stop)
    params = sampling_params(decoder, len(ids), max_tokens=body.max_tokens, param="max_tokens",
                             temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, seed=body.seed,
                             stop=stops, ignore_eos=body.ignore_eos)
    job = submit(state, ids, params, stream=body.stream)
    rid, created, model = f"cmpl-{uuid.uuid4().hex}", int(time.time()), state.config.model_name

    if not body.stream:
        return await _non_streamed(job, request, {"id": rid, "object": "text_completion", "created": created,
                                                  "model": model},
                                   lambda gen: {"text": gen.text})

    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(text: str, finish: str | None) -> str:
        c: dict[str, Any] = {"id": rid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            c["usage"] = None
        return sse(c)

    def usage_chunk(result: JobResult) -> str:
        return sse({"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [],
                    **_usage_and_spec(result)})

    return _stream(job, request, decoder.tokenizer.decode, stops, first=None, delta=lambda t: chunk(t, None),
                   last=lambda reason: chunk("", reason), usage=usage_chunk if include_usage else None)


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
    state = _state(request)
    state.check_model(body.model)
    decoder = state.ready()
    if body.logprobs:
        raise APIError(400, "logprobs are not supported", param="logprobs")
    ids = decoder.tokenizer.encode(chat_prompt(body.messages))
    check_prompt(decoder, ids)
    stops = stop_list(body.stop)
    max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    params = sampling_params(decoder, len(ids), max_tokens=max_tokens, param=param, temperature=body.temperature,
                             top_p=body.top_p, top_k=body.top_k, seed=body.seed, stop=stops,
                             ignore_eos=body.ignore_eos)
    job = submit(state, ids, params, stream=body.stream)
    rid, created, model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), state.config.model_name

    if not body.stream:
        return await _non_streamed(job, request, {"id": rid, "object": "chat.completion", "created": created,
                                                  "model": model},
                                   lambda gen: {"message": {"role": "assistant", "content": gen.text}})

    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(delta: dict[str, str], finish: str | None) -> str:
        c: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            c["usage"] = None
        return sse(c)

    def usage_chunk(result: JobResult) -> str:
        return sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
                    **_usage_and_spec(result)})

    return _stream(job, request, decoder.tokenizer.decode, stops,
                   first=chunk({"role": "assistant", "content": ""}, None),
                   delta=lambda t: chunk({"content": t}, None), last=lambda reason: chunk({}, reason),
                   usage=usage_chunk if include_usage else None)


def _stream(job: Job, request: Request, decode: Any, stops: list[str], *, first: str | None, delta: Any,
            last: Any, usage: Any) -> StreamingResponse:
    """SSE body: [first], text deltas as rounds finish, the rest of the text, the finish chunk, [usage], [DONE]."""

    async def events() -> AsyncIterator[str]:
        streamer = TextStreamer(decode, stops)
        try:
            if first is not None:
                yield first
            async for kind, payload in job_events(job, request):
                if kind == "progress":
                    text = streamer.update(payload)
                    if text:
                        yield delta(text)
                elif kind == "done":
                    gen = payload.generation
                    text = streamer.finish(gen.text)
                    if text:
                        yield delta(text)
                    yield last(gen.finish_reason)
                    if usage is not None:
                        yield usage(payload)
                    yield DONE
                else:  # the stream has started (200 sent): report the error in-band, as OpenAI does
                    yield sse(error_body(400 if isinstance(payload, ValueError) else 500, str(payload)))
                    yield DONE
        finally:
            job.cancel()  # the client left mid-stream: stop the model at its next round

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
