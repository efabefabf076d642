"""HTTP server of the bundled engine (DESIGN §7.4, §7.5): OpenAI and SGLang APIs, Prometheus metrics.

    config.py         ServerConfig; flags and their ENGINE_* environment twins
    app.py            create_app(config): FastAPI app, background model load
    state.py          shared state, model loading, readiness
    worker.py         bounded FIFO queue and the single model-loop thread
    submit.py         request limits, queueing, waiting with disconnect cancellation
    streaming.py      SSE framing, held-back text for exact streaming
    metrics.py        the ddtree:* Prometheus series
    routes_openai.py  /v1/models, /v1/completions, /v1/chat/completions
    routes_native.py  /health, /server_info, /metrics, /tokenize, /generate
    cli.py            `python -m engine serve`
"""

from __future__ import annotations

from engine.server.config import ServerConfig

__all__ = ["ServerConfig"]
