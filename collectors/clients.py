"""The one place collectors build an engine_client for a server, and classify its errors.

engine_client is imported lazily: a Django process that never probes (web, beat) needs no httpx.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings

from collectors.models import Server

# Transient = worth retrying later (STYLE 6): could not connect, timed out, 429 or 5xx.
RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


def client_for(server: Server, **kwargs: Any) -> Any:
    """A client with the configured bounds (read timeout, overall deadline); `kwargs` override them."""
    from django.conf import settings

    from engine_client.client import EngineClient

    dialect = "auto" if server.kind == Server.Kind.AUTO else server.kind
    kwargs.setdefault("transport", allowlist_transport())  # issue 8: SPECTATOR_ALLOWED_SERVER_HOSTS, per request
    bounds = {"read_timeout": settings.SPECTATOR_HTTP_READ_TIMEOUT, "deadline": settings.SPECTATOR_HTTP_DEADLINE}
    return EngineClient(server.base_url, api_key=server.api_key or None, dialect=dialect, **{**bounds, **kwargs})


def scrape_bounds() -> dict[str, float]:
    """A scrape must end, and store its row, before the task's soft time limit interrupts it: all its
    attempts (the client retries transient failures) together get at most half of that limit."""
    from django.conf import settings

    from engine_client.constants import DEFAULT_RETRIES

    share = settings.SPECTATOR_SCRAPE_TIME_LIMIT / 2 / (DEFAULT_RETRIES + 1)
    return {"read_timeout": min(settings.SPECTATOR_HTTP_READ_TIMEOUT, share),
            "deadline": min(settings.SPECTATOR_HTTP_DEADLINE, share)}


def allowlist_transport() -> Any:
    from collectors.hosts import AllowlistTransport

    return AllowlistTransport() if settings.SPECTATOR_ALLOWED_SERVER_HOSTS else None


def is_client_error(exc: BaseException) -> bool:
    from engine_client.exceptions import EngineClientError

    return isinstance(exc, EngineClientError)


def is_transient(exc: BaseException) -> bool:
    from engine_client.exceptions import ConnectError, StatusError, TimeoutError

    if isinstance(exc, ConnectError | TimeoutError):
        return True
    return isinstance(exc, StatusError) and exc.status_code in RETRY_STATUS


def describe(exc: BaseException, secret: str = "") -> str:
    """The reason stored on a failed row: the error type and message. engine_client never puts the key in a
    message itself, but an error body or a non-JSON excerpt is the server's text, and a server (or a proxy
    in front of it) may echo the request's headers: `secret`, the server's API key, is blanked out of it."""
    text = f"{type(exc).__name__}: {str(exc) or repr(exc)}"
    return text.replace(secret, "[api key]") if secret else text


def clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become None (Postgres json rejects them), tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value
