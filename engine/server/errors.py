"""One error type for the HTTP boundary and the handlers that turn every failure into JSON.

    APIError (status, message, type, param, headers)
      400 invalid_request_error   malformed JSON, wrong types, limits (the message names the limit)
      404 not_found_error         unknown model name or path
      503 service_unavailable     still loading, or the queue is full (with Retry-After)
      500 internal_error          a bug; the model loop survives it

Bodies follow OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so the official
client raises its typed exceptions with our message.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("engine.server")

TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error",
         413: "invalid_request_error", 422: "invalid_request_error", 500: "internal_error",
         503: "service_unavailable"}


class APIError(Exception):
    def __init__(self, status_code: int, message: str, *, param: str | None = None,
                 headers: dict[str, str] | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.headers = headers
        self.code = code


def error_body(status_code: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status_code, "invalid_request_error"),
                      "param": param, "code": code if code is not None else status_code}}


def error_response(status_code: int, message: str, *, param: str | None = None,
                   headers: dict[str, str] | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status_code, message, param, code), status_code=status_code, headers=headers)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """'max_tokens: Input should be greater than or equal to 1' from pydantic's error list."""
    parts, first_param = [], None
    for err in exc.errors()[:5]:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON ({err.get('ctx', {}).get('error', 'decode error')})")
            continue
        where = ".".join(loc) or "body"
        first_param = first_param or where
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request", first_param


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status_code, exc.message, param=exc.param, headers=exc.headers, code=exc.code)

    # FastAPI answers bad bodies with 422; DESIGN §7.4 asks for 400 with a message, as OpenAI does.
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return error_response(400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")
