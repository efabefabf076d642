"""What a completion returns: text, usage, timings, and the speculative fields each server reports.

Per-response speculative fields, normalised to `SpecFields` (DESIGN §4 "acceptance over the probe window"):
  bundled engine  `spec`: verify_steps, tau, drafted_tokens, accepted_tokens, decode_seconds
  SGLang          `meta_info`: spec_verify_ct, spec_accept_length, spec_draft_token_num / spec_draft_tokens,
                  spec_accept_token_num / spec_accepted_tokens, decode_time_s, cached_tokens
  vLLM            `metrics` (--enable-per-request-metrics): generation_time_ms;
                  `metrics.speculative_decoding` (--per-request-spec-decode-metrics): num_spec_steps,
                  num_draft_tokens, num_accepted_draft_tokens, mean_acceptance_length
  llama.cpp       `timings`: predicted_ms, draft_n, draft_n_accepted
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Completion", "SpecFields", "StreamChunk", "parse_spec_fields"]


@dataclass
class SpecFields:
    """One response's speculative statistics; None where the server did not say."""

    source: str
    steps: int | None = None  # verify passes
    tau: float | None = None  # tokens committed per pass, bonus included
    drafted: int | None = None
    accepted: int | None = None
    decode_s: float | None = None  # server-side decode time (first to last token)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StreamChunk:
    t_s: float  # arrival, seconds after the request was sent
    text: str
    tokens: int | None  # tokens in this chunk when the server says (usage or output ids), else None


@dataclass
class Completion:
    """One /v1/completions answer. Times are seconds after the request was handed to the transport."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    spec: SpecFields | None
    request_id: str | None
    started_at: float  # wall clock (epoch seconds) when the request was sent
    first_byte_s: float | None
    first_token_s: float | None
    end_s: float
    stream: bool = False
    chunks: list[StreamChunk] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None  # the final JSON body (non-streaming) or the last data event

    @property
    def e2e_s(self) -> float:
        return self.end_s

    @property
    def ttft_s(self) -> float | None:
        return self.first_token_s


def _num(d: Any, *keys: str) -> float | None:
    if not isinstance(d, dict):
        return None
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def parse_spec_fields(body: dict[str, Any]) -> SpecFields | None:
    """Speculative fields of one response body, from whichever server shape it has (module docstring)."""
    spec = body.get("spec")
    if isinstance(spec, dict):
        return SpecFields("ddtree", _int(_num(spec, "verify_steps")), _num(spec, "tau"),
                          _int(_num(spec, "drafted_tokens")), _int(_num(spec, "accepted_tokens")),
                          _num(spec, "decode_seconds"))
    meta = body.get("meta_info")
    if not isinstance(meta, dict):
        choices = body.get("choices") or [{}]
        meta = choices[0].get("meta_info") if isinstance(choices[0], dict) else None
    if isinstance(meta, dict) and "spec_verify_ct" in meta:
        return SpecFields("sglang", _int(_num(meta, "spec_verify_ct")), _num(meta, "spec_accept_length"),
                          _int(_num(meta, "spec_draft_token_num", "spec_draft_tokens", "spec_num_proposed_drafts")),
                          _int(_num(meta, "spec_accept_token_num", "spec_accepted_tokens", "spec_num_correct_drafts")),
                          _num(meta, "decode_time_s"))
    metrics = body.get("metrics")
    if isinstance(metrics, dict):
        sd = metrics.get("speculative_decoding") or {}
        gen_ms = _num(metrics, "generation_time_ms")
        return SpecFields("vllm", _int(_num(sd, "num_spec_steps")), _num(sd, "mean_acceptance_length"),
                          _int(_num(sd, "num_draft_tokens")), _int(_num(sd, "num_accepted_draft_tokens")),
                          gen_ms / 1000 if gen_ms is not None else None)
    timings = body.get("timings")
    if isinstance(timings, dict):
        drafted, accepted = _int(_num(timings, "draft_n")), _int(_num(timings, "draft_n_accepted"))
        pred_ms = _num(timings, "predicted_ms")
        return SpecFields("llamacpp", None, None, drafted, accepted, pred_ms / 1000 if pred_ms is not None else None)
    return None


def cached_tokens(body: dict[str, Any]) -> int | None:
    """Prompt tokens served from a prefix cache, where the server reports them."""
    usage = body.get("usage") or {}
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    v = _num(details, "cached_tokens") if isinstance(details, dict) else None
    if v is None:
        meta = body.get("meta_info")
        v = _num(meta, "cached_tokens")
    if v is None:
        v = _num(body.get("timings"), "cache_n")
    return _int(v)
