"""`python -m engine serve …`: parse settings, build the app, run uvicorn until stopped.

Exit status: 0 after a normal stop, 1 when the model failed to load (the server stops itself
rather than answer 503 forever), 2 on bad settings.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from engine.server.config import add_arguments, config_from_args


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="OpenAI/SGLang-compatible HTTP server with Prometheus metrics",
                       description="Every flag has an environment twin, ENGINE_<FLAG>; the flag wins.")
    add_arguments(p)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.server.app import create_app

    try:
        config = config_from_args(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper() if config.log_level != "trace" else "DEBUG",
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    failed = threading.Event()
    server: uvicorn.Server | None = None

    def on_load_failure() -> None:
        failed.set()
        if server is not None:
            server.should_exit = True

    app = create_app(config, on_load_failure=on_load_failure)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=config.log_level,
                                           timeout_graceful_shutdown=5))
    server.run()
    return 1 if failed.is_set() else 0
