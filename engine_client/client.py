"""`EngineClient`: completions with precise timings, tokenize, fingerprint and /metrics for one server.

Works with the bundled engine (`ddtree`), vLLM, SGLang, llama.cpp and any OpenAI-compatible server.
`dialect="auto"` asks the server which it is on first need (`fingerprint.detect_dialect`).

Retries (STYLE 6): connect errors, timeouts, 408/429/5xx are retried with capped exponential backoff;
other 4xx never. A stream is retried only if nothing of its body had arrived.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from engine_client import constants as C
from engine_client import fingerprint as fp
from engine_client.exceptions import (
    ConnectError,
    ConnectTimeout,
    DeadlineExceeded,
    EngineClientError,
    ProtocolError,
    ReadTimeout,
    StatusError,
    TimeoutError,
)
from engine_client.responses import Completion, StreamChunk, cached_tokens, parse_spec_fields
from engine_client.sse import SSEDecoder

__all__ = ["EngineClient"]

log = logging.getLogger(__name__)


def _validate_url(base_url: str) -> str:
    url = httpx.URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    return str(url).rstrip("/")


class EngineClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, dialect: str = "auto",
                 transport: httpx.BaseTransport | None = None, connect_timeout: float = C.DEFAULT_CONNECT_TIMEOUT_S,
                 read_timeout: float = C.DEFAULT_READ_TIMEOUT_S, deadline: float = C.DEFAULT_DEADLINE_S,
                 retries: int = C.DEFAULT_RETRIES, backoff_base: float = C.BACKOFF_BASE_S,
                 backoff_cap: float = C.BACKOFF_CAP_S, model: str | None = None) -> None:
        if dialect not in C.DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(C.DIALECTS)}, not {dialect!r}")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if not (connect_timeout > 0 and read_timeout > 0 and deadline > 0):
            raise ValueError("timeouts and the deadline must be > 0")
        self.base_url = _validate_url(base_url)
        self.retries, self.backoff_base, self.backoff_cap = retries, backoff_base, backoff_cap
        self.deadline = deadline
        self.model = model
        self._dialect = None if dialect == "auto" else dialect
        self._has_tokenize: bool | None = None
        headers = {"User-Agent": C.USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # No single wait may outlast the whole deadline either.
        timeout = httpx.Timeout(min(read_timeout, deadline), connect=connect_timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def __repr__(self) -> str:  # never the key
        return f"EngineClient({self.base_url!r}, dialect={self._dialect or 'auto'!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- dialect ----------------------------------------------------------------------------------

    @property
    def dialect(self) -> str:
        """The server kind: ddtree, vllm, sglang, llamacpp or openai (asked of the server once if "auto")."""
        if self._dialect is None:
            self._dialect = fp.detect_dialect(self)
        return self._dialect

    # -- HTTP with retries ------------------------------------------------------------------------

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.backoff_cap, self.backoff_base * 2 ** attempt)
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            delay = min(self.backoff_cap, max(delay, float(retry_after)))
        return delay * (0.5 + random.random() / 2) if delay else 0.0  # jitter: probes of a fleet don't align

    def _request(self, method: str, path: str, json_body: Any = None, *, limit: int = C.MAX_JSON_BYTES,
                 on_start: Callable[[float], None] | None = None,
                 on_chunk: Callable[[bytes, float], None] | None = None) -> tuple[bytes, float, float, float | None]:
        """Whole body (capped at `limit`), wall start, perf start, perf time of the first body byte.

        1. One attempt (`_attempt`); a 2xx body is returned as it is.
        2. A transient failure (connect error, timeout, 408/429/5xx) before any body byte arrived is retried
           after min(cap, base * 2**attempt) seconds (Retry-After honoured up to the cap), `retries` times.
        3. Anything else is raised at once.
        """
        attempt = 0
        while True:
            try:
                return self._attempt(method, path, json_body, limit, on_start, on_chunk)
            except (StatusError, ConnectError, TimeoutError) as e:
                # Once a body has started (a stream half sent), a retry would duplicate work: never.
                retryable = (e.retryable if isinstance(e, StatusError) else True) and not getattr(e, "body_started",
                                                                                                  False)
                if not retryable or attempt >= self.retries:
                    raise
                delay = self._backoff(attempt, getattr(e, "retry_after", None))
                log.info("%s %s%s failed (%s); retry %d in %.2f s", method, self.base_url, path, type(e).__name__,
                         attempt + 1, delay)
                time.sleep(delay)
                attempt += 1

    def _attempt(self, method: str, path: str, json_body: Any, limit: int, on_start: Callable[[float], None] | None,
                 on_chunk: Callable[[bytes, float], None] | None) -> tuple[bytes, float, float, float | None]:
        where = f"{method} {self.base_url}{path}"
        first: float | None = None
        started_at, t0 = time.time(), time.perf_counter()
        deadline = t0 + self.deadline
        if on_start is not None:
            on_start(t0)
        watchdog: threading.Timer | None = None

        def late() -> DeadlineExceeded:
            err = DeadlineExceeded(f"{where}: no complete answer within the {self.deadline:g} s deadline")
            err.body_started = first is not None  # type: ignore[attr-defined]
            return err

        try:
            with self._http.stream(method, path, json=json_body) as r:
                watchdog = _watchdog(r, deadline - time.perf_counter())
                if r.status_code >= 400:
                    raise self._status_error(r, method, path)
                buf = bytearray()
                for chunk in r.iter_bytes():  # decoded: the cap also bounds a gzip bomb
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    if now > deadline:
                        raise late()
                    buf += chunk
                    if len(buf) > limit:
                        raise ProtocolError(f"{where}: body larger than {limit} bytes")
                    if on_chunk is not None:
                        on_chunk(chunk, now)
                return bytes(buf), started_at, t0, first
        except httpx.ConnectTimeout as e:
            raise ConnectTimeout(f"{where}: connect timed out") from e
        except httpx.ConnectError as e:
            raise ConnectError(f"{where}: cannot connect ({e})") from e
        except httpx.TimeoutException as e:
            if time.perf_counter() >= deadline:
                raise late() from e
            err: EngineClientError = ReadTimeout(f"{where}: no data for too long")
            err.body_started = first is not None  # type: ignore[attr-defined]
            raise err from e
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            if time.perf_counter() >= deadline:  # the watchdog cut the connection
                raise late() from e
            err = ConnectError(f"{where}: connection lost ({e})")
            err.body_started = first is not None  # type: ignore[attr-defined]
            raise err from e
        except httpx.HTTPError as e:  # anything else httpx raises stays inside our tree
            raise ProtocolError(f"{where}: {type(e).__name__}: {e}") from e
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _status_error(self, r: httpx.Response, method: str, path: str) -> StatusError:
        body = _read_capped(r, C.MAX_BODY_IN_ERROR_BYTES).decode("utf-8", "replace")
        rid = r.headers.get("x-request-id") or r.headers.get("request-id")
        message: Any = body
        try:
            err = json.loads(body)
            message = (err.get("error") or {}).get("message") or err.get("detail") or err.get("message") or body
        except (ValueError, AttributeError):
            pass
        e = StatusError(f"{method} {self.base_url}{path} → {r.status_code}: {str(message)[:300]}",
                        status_code=r.status_code, body=body, request_id=rid)
        e.retry_after = r.headers.get("retry-after")  # type: ignore[attr-defined]
        return e

    def _json(self, method: str, path: str, json_body: Any = None) -> Any:
        body, *_ = self._request(method, path, json_body)
        return _loads(body, f"{method} {self.base_url}{path}")

    def get_json(self, path: str) -> Any:
        """GET a JSON document (used by the fingerprint)."""
        return self._json("GET", path)

    # -- endpoints --------------------------------------------------------------------------------

    def complete(self, prompt: str | list[int], *, max_tokens: int, temperature: float = 0.0, seed: int | None = 0,
                 ignore_eos: bool = True, stream: bool = False, extra: dict[str, Any] | None = None) -> Completion:
        """POST /v1/completions; streaming records every SSE chunk's arrival and token count."""
        body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                                "ignore_eos": ignore_eos, "n": 1, "stream": stream}
        if seed is not None:
            body["seed"] = seed
        if self.model:
            body["model"] = self.model
        if stream:
            # continuous_usage_stats: vLLM then counts tokens in every chunk; others ignore it.
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        body.update(extra or {})
        where = f"POST {self.base_url}/v1/completions"
        if not stream:
            raw, started_at, t0, first = self._request("POST", "/v1/completions", body)
            end = time.perf_counter()
            data = _loads(raw, where)
            if not isinstance(data, dict) or not data.get("choices"):
                raise ProtocolError(f"{where}: no choices in the answer")
            return _completion(data, started_at, t0, first, None, end)  # first token: not observable
        return self._stream(body, where)

    def _stream(self, body: dict[str, Any], where: str) -> Completion:
        decoder, chunks, t0_box = SSEDecoder(), [], [0.0]
        state: dict[str, Any] = {"usage": None, "prev": 0, "final": {}}

        def on_start(t0: float) -> None:  # a retried attempt starts from scratch
            nonlocal decoder
            decoder, t0_box[0] = SSEDecoder(), t0
            chunks.clear()
            state.update(usage=None, prev=0, final={})

        def on_chunk(data: bytes, now: float) -> None:
            for event in decoder.feed(data):
                _stream_event(event.data, now - t0_box[0], chunks, state, where)

        _, started_at, _, first = self._request("POST", "/v1/completions", body, on_start=on_start,
                                                on_chunk=on_chunk)
        end = time.perf_counter()
        for event in decoder.flush():
            _stream_event(event.data, end - t0_box[0], chunks, state, where)
        t0 = t0_box[0]
        text = "".join(c.text for c in chunks)
        final: dict[str, Any] = dict(state["final"])
        final.setdefault("choices", [{"text": text, "finish_reason": None}])
        final["usage"] = state["usage"]
        comp = _completion(final, started_at, t0, first, None, end)
        comp.text, comp.stream, comp.chunks = text, True, chunks
        token_chunks = [c for c in chunks if c.text or (c.tokens or 0) > 0]
        comp.first_token_s = token_chunks[0].t_s if token_chunks else None
        return comp

    def tokenize(self, text: str) -> list[int] | None:
        """Token ids as the completions endpoint counts them (special tokens included); None if unsupported."""
        if self._has_tokenize is False:
            return None
        kind = self.dialect
        body: dict[str, Any] = {"content": text, "add_special": True} if kind == "llamacpp" else \
            {"prompt": text, "add_special_tokens": True}
        if self.model and kind != "llamacpp":
            body["model"] = self.model
        try:
            data = self._json("POST", "/tokenize", body)
        except StatusError as e:
            # Missing, or a /tokenize of another shape (SGLang builds differ): count by calibration instead.
            if e.status_code in (400, 404, 405, 422, 501):
                self._has_tokenize = False
                return None
            raise
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if tokens is None and isinstance(data, dict):
            tokens = data.get("input_ids")
        if not isinstance(tokens, list):
            raise ProtocolError(f"POST {self.base_url}/tokenize: no token list in the answer")
        self._has_tokenize = True
        return [t if isinstance(t, int) else t.get("id") for t in tokens]

    def fingerprint(self) -> dict[str, Any]:
        """Version, model, speculative config, max context and a stable hash (see `fingerprint.py`)."""
        return fp.fingerprint(self)

    def metrics_text(self, max_bytes: int = C.MAX_METRICS_BYTES) -> str:
        """GET /metrics as text; ProtocolError beyond `max_bytes`."""
        body, *_ = self._request("GET", "/metrics", limit=max_bytes)
        return body.decode("utf-8", "replace")


def _watchdog(r: httpx.Response, seconds: float) -> threading.Timer | None:
    """Cut the connection when the deadline passes. The loop in `_attempt` checks the deadline between
    chunks, but a read that blocks (a server that stalls after its headers) only returns after the read
    timeout; shutting the socket down wakes it at once, so the deadline is a real bound on the call."""
    stream = r.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if not isinstance(sock, socket.socket):
        return None  # an injected transport (tests): the between-chunks check still applies

    def cut() -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    timer = threading.Timer(max(0.0, seconds), cut)
    timer.daemon = True
    timer.start()
    return timer


def _read_capped(r: httpx.Response, limit: int) -> bytes:
    """At most `limit` bytes of a body (an error page of 50 MB is not read whole just to quote it)."""
    buf = bytearray()
    for chunk in r.iter_bytes():
        buf += chunk
        if len(buf) >= limit:
            break
    return bytes(buf[:limit])


def _loads(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ProtocolError(f"{where}: answer is not JSON ({raw[:80]!r})") from e


def _completion(data: dict[str, Any], started_at: float, t0: float, first_byte: float | None,
                first_token: float | None, end: float) -> Completion:
    choice = (data.get("choices") or [{}])[0]
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None

    def rel(t: float | None) -> float | None:
        return None if t is None else t - t0

    return Completion(
        text=choice.get("text") or "", finish_reason=choice.get("finish_reason"),
        prompt_tokens=(usage or {}).get("prompt_tokens"), completion_tokens=(usage or {}).get("completion_tokens"),
        cached_tokens=cached_tokens(data), spec=parse_spec_fields(data), request_id=data.get("id"),
        started_at=started_at, first_byte_s=rel(first_byte), first_token_s=rel(first_token), end_s=end - t0,
        usage=usage, raw=data)


def _stream_event(data: str, t_s: float, chunks: list[StreamChunk], state: dict[str, Any], where: str) -> None:
    if data.strip() == "[DONE]":
        return
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"{where}: SSE data is not JSON ({data[:80]!r})") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: SSE data is not an object")
    if "error" in obj:
        err = obj["error"] if isinstance(obj["error"], dict) else {"message": obj["error"]}
        code = int(err["code"]) if str(err.get("code") or "").isdigit() else 500
        e = StatusError(f"{where}: error in stream: {err.get('message')}", status_code=code, body=data)
        e.body_started = True  # type: ignore[attr-defined]
        raise e
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    tokens = None
    if usage and usage.get("completion_tokens") is not None:
        state["usage"] = usage
        tokens = int(usage["completion_tokens"]) - state["prev"]
        state["prev"] = int(usage["completion_tokens"])
    choices = obj.get("choices") or []
    text = "".join((c.get("text") or "") for c in choices if isinstance(c, dict))
    for c in choices:
        if isinstance(c, dict) and c.get("finish_reason"):
            state["final"] = {**obj, "choices": [c]}
    for key in ("spec", "meta_info", "metrics", "timings"):
        if key in obj:
            state["final"] = {**state["final"], key: obj[key]}
    if choices:  # a usage-only chunk (the end-of-stream summary) carries no tokens of its own
        chunks.append(StreamChunk(t_s, text, tokens))
