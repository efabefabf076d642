"""One error type per boundary: everything `EngineClient` raises derives from `EngineClientError`.

    EngineClientError
     ├── ConnectError          the server could not be reached (refused, DNS, TLS, connect timeout)
     ├── TimeoutError          the server was reached but did not answer in time
     │    ├── ConnectTimeout   (also a ConnectError: nothing was sent)
     │    └── ReadTimeout      the response (or the next SSE chunk) was too slow
     │         └── DeadlineExceeded  the whole exchange took longer than the client's deadline
     ├── StatusError           a non-2xx answer: status_code, body (truncated), request_id
     └── ProtocolError         a 2xx answer we cannot use: not JSON, wrong shape, oversize body,
                               malformed SSE or Prometheus text

Messages name the URL and never contain the API key.
"""

from __future__ import annotations

import builtins

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "DeadlineExceeded",
    "EngineClientError",
    "ProtocolError",
    "ReadTimeout",
    "StatusError",
    "TimeoutError",
]

MAX_BODY_IN_ERROR = 2000


class EngineClientError(Exception):
    """Base class: catch this to handle every failure of a call to an inference server."""


class ConnectError(EngineClientError):
    """The server could not be reached."""


class TimeoutError(EngineClientError, builtins.TimeoutError):  # noqa: A001 - mirrors httpx's naming
    """The server did not answer in time."""


class ConnectTimeout(TimeoutError, ConnectError):
    """The TCP/TLS connection was not established in time (nothing was sent)."""


class ReadTimeout(TimeoutError):
    """The connection was up but the response (or the next chunk) did not arrive in time."""


class DeadlineExceeded(ReadTimeout):
    """Bytes kept coming, but too slowly: the whole response did not arrive within the deadline."""


class StatusError(EngineClientError):
    """The server answered with a non-2xx status."""

    def __init__(self, message: str, *, status_code: int, body: str = "", request_id: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body[:MAX_BODY_IN_ERROR]
        self.request_id = request_id

    @property
    def retryable(self) -> bool:
        from engine_client.constants import RETRY_STATUS

        return self.status_code in RETRY_STATUS


class ProtocolError(EngineClientError):
    """A 2xx answer that cannot be used: garbage, wrong shape or too big."""
