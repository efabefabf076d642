"""Which server is this, and what is it running? Dialect detection and a deployment fingerprint.

Endpoints asked, in order (the first that answers as expected decides the dialect):
  bundled engine  GET /server_info      version, git revision, model/draft sha256, algorithm, budget, block size
  SGLang          GET /get_server_info  version, model_path, speculative_* server args, context length
  llama.cpp       GET /props            build_info, model_path, n_ctx, speculative settings
  vLLM            GET /version          version (+ /v1/models for the model and max_model_len)
  any other       GET /v1/models        model id only ("openai")

The hash covers only what identifies a deployment (kind, version, model, speculative config, max
context), never volatile fields such as queue length, so it changes exactly when a deploy does.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from engine_client.exceptions import ProtocolError, StatusError

if TYPE_CHECKING:
    from engine_client.client import EngineClient

__all__ = ["detect_dialect", "fingerprint", "fingerprint_hash"]


def _try(client: EngineClient, path: str) -> dict[str, Any] | None:
    """The JSON object at `path`, or None when the server has no such endpoint (any 4xx or non-object)."""
    try:
        data = client.get_json(path)
    except StatusError as e:
        if 400 <= e.status_code < 500:
            return None
        raise
    except ProtocolError:
        return None
    return data if isinstance(data, dict) else None


def detect_dialect(client: EngineClient) -> str:
    info = _try(client, "/server_info")
    if info and "algorithm" in info and "budget" in info:
        return "ddtree"
    if _try(client, "/get_server_info") is not None:
        return "sglang"
    props = _try(client, "/props")
    if props and ("default_generation_settings" in props or "build_info" in props):
        return "llamacpp"
    version = _try(client, "/version")
    if version and "version" in version:
        return "vllm"
    return "openai"


def _models(client: EngineClient) -> tuple[str | None, int | None]:
    data = _try(client, "/v1/models") or {}
    first = (data.get("data") or [{}])[0]
    return first.get("id"), first.get("max_model_len")


def fingerprint_hash(fp: dict[str, Any]) -> str:
    stable = {k: fp.get(k) for k in ("kind", "version", "model", "speculative", "max_context")}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint(client: EngineClient) -> dict[str, Any]:
    """{kind, version, model, max_context, speculative, raw, hash}; fields a server does not expose are None."""
    kind = client.dialect
    fp: dict[str, Any] = {"kind": kind, "version": None, "model": None, "max_context": None, "speculative": None,
                          "raw": {}}
    if kind == "ddtree":
        info = _try(client, "/server_info") or {}
        model, draft = info.get("model") or {}, info.get("draft") or {}
        fp.update(version=info.get("version"), max_context=info.get("max_context"),
                  model={"name": model.get("name"), "sha256": model.get("sha256")},
                  speculative={"algorithm": info.get("algorithm"), "budget": info.get("budget"),
                               "block_size": info.get("block_size"), "draft_window": info.get("draft_window"),
                               "draft": draft.get("name"), "draft_sha256": draft.get("sha256"),
                               "dtype": info.get("dtype"), "device": info.get("device")},
                  git_revision=info.get("git_revision"), raw={"server_info": info})
    elif kind == "sglang":
        info = _try(client, "/get_server_info") or {}
        spec = {k: v for k, v in info.items() if k.startswith("speculative_")}
        fp.update(version=info.get("version"), model=info.get("served_model_name") or info.get("model_path"),
                  max_context=info.get("context_length"), speculative=spec or None,
                  raw={"get_server_info": {k: v for k, v in info.items() if k != "internal_states"}})
    elif kind == "llamacpp":
        props = _try(client, "/props") or {}
        gen = props.get("default_generation_settings") or {}
        params = gen.get("params") or {}
        spec = {k: v for k, v in params.items() if k.startswith("speculative")}
        fp.update(version=props.get("build_info"), model=props.get("model_path") or props.get("model_alias"),
                  max_context=gen.get("n_ctx"), speculative=spec or None, raw={"props": props})
    else:
        version = _try(client, "/version") if kind == "vllm" else None
        fp["version"] = (version or {}).get("version")
        fp["raw"] = {"version": version}
    if fp["model"] is None or fp["max_context"] is None:
        model_id, max_len = _models(client)
        fp["model"] = fp["model"] or model_id
        fp["max_context"] = fp["max_context"] or max_len
    fp["hash"] = fingerprint_hash(fp)
    return fp
