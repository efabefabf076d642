"""Defaults for `EngineClient` and the probe, in one place so callers (and the dashboard) can see them."""

from __future__ import annotations

# Connect fails fast (a dead server should be reported in seconds); read waits for long generations
# (1200 tokens at a 5k context on a slow server take minutes).
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 300.0
# The read timeout bounds each wait for the next bytes, so a server that trickles one byte a second
# never trips it: every request also has an overall deadline, from sending to the last body byte.
DEFAULT_DEADLINE_S = 900.0

# Retries apply only to transient failures (connect errors, timeouts, 429, 5xx).
DEFAULT_RETRIES = 2
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0

# /metrics of a big vLLM deployment is a few hundred KB; anything far larger is not an exposition.
MAX_METRICS_BYTES = 8 * 1024 * 1024
# JSON bodies (completions, server info) beyond this are treated as garbage, not parsed.
MAX_JSON_BYTES = 32 * 1024 * 1024
# Of an error answer (4xx/5xx) only this much is read, to quote it in the exception.
MAX_BODY_IN_ERROR_BYTES = 64 * 1024

# Status codes worth another attempt: rate limiting and server-side trouble.
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})

USER_AGENT = "spectator-engine-client/0.1"
DIALECTS = ("auto", "ddtree", "vllm", "sglang", "llamacpp", "openai")
