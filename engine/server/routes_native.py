"""`/health`, `/server_info`, `/metrics`, `/tokenize` and SGLang-style `/generate`.

`/generate` answers `{"text", "output_ids", "meta_info"}`; `meta_info` carries SGLang's per-request
speculative fields (`spec_verify_ct` = verify passes, `spec_accept_length` = τ, the mean tokens
committed per pass, `spec_accept_histogram`[k] = passes that committed k + 1 tokens) plus
server-side `prefill_time_s`, `decode_time_s`, `queue_time_s` and `e2e_time_s`. With `stream`,
each SSE chunk carries the text so far (SGLang's cumulative style) and the last one the full
`meta_info`, then `data: [DONE]`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine import __version__
from engine.server.errors import APIError, error_body
from engine.server.routes_openai import chat_prompt
from engine.server.schemas import GenerateRequest, TokenizeRequest
from engine.server.state import ServerState
from engine.server.streaming import DONE, TextStreamer, sse
from engine.server.submit import check_prompt, sampling_params, stop_list, submit, wait_result
from engine.server.worker import JobResult, job_events

router = APIRouter()


def _state(request: Request) -> ServerState:
    return request.app.state.server


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    state = _state(request)
    if state.status == "ready":
        return JSONResponse({"status": "ok"})
    body: dict[str, Any] = {"status": state.status}
    if state.error:
        body["message"] = state.error
    else:
        body["message"] = "the model is loading"
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


@router.get("/server_info")
async def server_info(request: Request) -> dict[str, Any]:
    state, c = _state(request), _state(request).config
    d = state.decoder
    return {
        "version": __version__,
        "git_revision": state.info.get("git_revision"),
        "status": state.status,
        "model": {"name": c.model_name, "path": c.model, "sha256": state.info.get("model_sha256")},
        "draft": {"name": c.draft_name, "path": c.draft, "sha256": state.info.get("draft_sha256")} if c.draft else None,
        "algorithm": c.algorithm,
        "budget": d.budget if d is not None else c.budget,
        "lookup": d.lookup if d is not None else c.lookup,
        "lookup_tokens": c.lookup_tokens if d is None else d.lookup_tokens if d.lookup else None,
        "block_size": d.block_size if d is not None else c.block_size,
        "draft_window": d.draft_window if d is not None else c.draft_window_size,
        "dtype": str(d.dtype).removeprefix("torch.") if d is not None else c.dtype,
        "device": str(d.device) if d is not None else c.device,
        "max_context": d.max_context if d is not None else c.max_context,
        "page_size": None,  # one contiguous KV cache per sequence, no paging
        "max_queue_length": c.max_queue_length,
        "requests_waiting": state.worker.waiting,
        "load_seconds": state.info.get("load_seconds"),
    }


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(generate_latest(_state(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, request: Request) -> dict[str, Any]:
    state = _state(request)
    state.check_model(body.model)
    decoder = state.ready()
    given = [x for x in (body.prompt, body.text, body.messages) if x is not None]
    if len(given) != 1:
        raise APIError(400, "give exactly one of prompt, text or messages")
    text = chat_prompt(body.messages) if body.messages is not None else (body.prompt or body.text or "")
    tokens = decoder.tokenizer.encode(text, add_bos=body.add_special_tokens)
    return {"tokens": tokens, "count": len(tokens), "max_model_len": decoder.max_context}


def meta_info(rid: str, result: JobResult) -> dict[str, Any]:
    gen, s = result.generation, result.generation.stats
    finish: dict[str, Any] = {"type": gen.finish_reason}
    if gen.finish_reason == "length":
        finish["length"] = len(gen.tokens)
    return {
        "id": rid,
        "finish_reason": finish,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": len(gen.tokens),
        "cached_tokens": 0,
        "spec_verify_ct": s.rounds,
        "spec_accept_length": s.tau,
        "spec_accept_histogram": s.histogram(),
        "spec_draft_tokens": s.drafted_nodes,
        "spec_accepted_tokens": s.accepted_drafts,
        "prefill_time_s": s.prefill_seconds,
        "decode_time_s": s.decode_seconds,
        "queue_time_s": result.queue_seconds,
        "e2e_time_s": result.e2e_seconds,
    }


@router.post("/generate")
async def generate(body: GenerateRequest, request: Request) -> Response:
    state = _state(request)
    decoder = state.ready()
    if (body.text is None) == (body.input_ids is None):
        raise APIError(400, "give exactly one of text or input_ids")
    if body.text is not None:
        ids = decoder.tokenizer.encode(body.text) if body.text else []
    else:
        ids = list(body.input_ids or [])
    check_prompt(decoder, ids)
    sp = body.sampling_params
    stops = stop_list(sp.stop)
    params = sampling_params(decoder, len(ids), max_tokens=sp.max_new_tokens, param="max_new_tokens",
                             temperature=sp.temperature, top_p=sp.top_p, top_k=sp.top_k,
                             seed=sp.seed if sp.seed is not None else sp.sampling_seed, stop=stops,
                             ignore_eos=sp.ignore_eos)
    job = submit(state, ids, params, stream=body.stream)
    rid = body.rid or uuid.uuid4().hex

    if not body.stream:
        result = await wait_result(job, request)
        if result is None:
            return Response(status_code=499)
        return JSONResponse({"text": result.generation.text, "output_ids": result.generation.tokens,
                             "meta_info": meta_info(rid, result)})

    async def events() -> AsyncIterator[str]:
        streamer = TextStreamer(decoder.tokenizer.decode, stops)
        try:
            async for kind, payload in job_events(job, request):
                if kind == "progress":
                    if streamer.update(payload):
                        yield sse({"text": streamer.sent, "output_ids": payload,
                                   "meta_info": {"id": rid, "finish_reason": None, "prompt_tokens": len(ids),
                                                 "completion_tokens": len(payload)}})
                elif kind == "done":
                    streamer.finish(payload.generation.text)
                    yield sse({"text": payload.generation.text, "output_ids": payload.generation.tokens,
                               "meta_info": meta_info(rid, payload)})
                    yield DONE
                else:
                    yield sse(error_body(400 if isinstance(payload, ValueError) else 500, str(payload)))
                    yield DONE
        finally:
            job.cancel()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
