"""The FastAPI application: `create_app(config)` wires state, routes and error handlers.

Starting the app starts the model load on a background thread and returns at once, so uvicorn
binds the socket while the weights load (`/health` is 503 until then). Stopping it stops the
model loop. FastAPI serves the OpenAPI document at `/openapi.json`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from engine import __version__
from engine.server.config import ServerConfig
from engine.server.errors import install_handlers
from engine.server.routes_native import router as native_router
from engine.server.routes_openai import router as openai_router
from engine.server.state import ServerState


class JSONBodies:
    """Read every POST body as JSON whatever its Content-Type: `curl -d '{…}'` sends form encoding."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


def create_app(config: ServerConfig, *, on_load_failure: Callable[[], None] | None = None) -> FastAPI:
    state = ServerState.create(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.load_in_background(on_load_failure)
        yield
        state.worker.stop()

    app = FastAPI(title="Spectator DDTree engine", version=__version__, lifespan=lifespan,
                  description="OpenAI- and SGLang-compatible server for the bundled speculative-decoding engine.")
    app.state.server = state
    app.add_middleware(JSONBodies)
    install_handlers(app)
    app.include_router(native_router)
    app.include_router(openai_router)
    return app
