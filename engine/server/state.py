"""What the handlers share: the settings, the metrics, the queue, and the model once it has loaded.

Loading runs on a background thread started when the app starts, so the socket answers (`/health`
503) while the weights load; torch itself is first imported there.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.server.config import ServerConfig
from engine.server.errors import APIError
from engine.server.metrics import EngineMetrics
from engine.server.worker import ModelWorker

if TYPE_CHECKING:
    from engine.decode import Decoder

log = logging.getLogger("engine.server")


def git_revision() -> str | None:
    """ENGINE_GIT_REVISION if set (images without .git), else `git rev-parse HEAD` of this checkout."""
    if os.environ.get("ENGINE_GIT_REVISION"):
        return os.environ["ENGINE_GIT_REVISION"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@dataclass
class ServerState:
    config: ServerConfig
    metrics: EngineMetrics
    worker: ModelWorker
    status: str = "loading"  # loading → ready, or loading → error
    error: str | None = None
    decoder: Decoder | None = None
    info: dict[str, Any] = field(default_factory=dict)  # weight hashes, git revision: computed while loading
    started_at: int = field(default_factory=lambda: int(time.time()))

    @classmethod
    def create(cls, config: ServerConfig) -> ServerState:
        metrics = EngineMetrics(config.model_name, config.algorithm)
        return cls(config, metrics, ModelWorker(metrics, config.max_queue_length))

    def ready(self) -> Decoder:
        """The decoder, or a 503 the client can retry."""
        if self.decoder is None:
            if self.status == "error":
                raise APIError(503, f"the model failed to load: {self.error}")
            raise APIError(503, "the model is still loading", headers={"Retry-After": "1"})
        return self.decoder

    def check_model(self, name: str | None) -> None:
        if name and name != self.config.model_name:
            raise APIError(404, f"model {name!r} not found; this server serves {self.config.model_name!r}",
                           param="model", code="model_not_found")

    def load_in_background(self, on_failure: Callable[[], None] | None = None) -> threading.Thread:
        thread = threading.Thread(target=self._load, args=(on_failure,), name="model-load", daemon=True)
        thread.start()
        return thread

    def _load(self, on_failure: Callable[[], None] | None) -> None:
        c = self.config
        try:
            if c.load_delay:
                time.sleep(c.load_delay)
            from engine.checkpoint import weights_hash
            from engine.runtime import load_decoder

            t0 = time.perf_counter()
            decoder = load_decoder(c.model, c.draft, device=c.device, dtype=c.dtype, algorithm=c.algorithm,
                                   budget=c.budget, block_size=c.block_size, draft_window=c.draft_window_size,
                                   max_context=c.max_context, lookup=c.lookup,
                                   lookup_tokens=c.lookup_tokens)
            self.info = {
                "model_sha256": weights_hash(c.model),
                "draft_sha256": weights_hash(c.draft) if c.draft else None,
                "git_revision": git_revision(),
                "load_seconds": round(time.perf_counter() - t0, 3),
            }
            self.worker.start(decoder)
            self.decoder = decoder
            self.status = "ready"
            log.info("model %s ready on %s (%s) in %.1f s", c.model_name, decoder.device, decoder.dtype,
                     self.info["load_seconds"])
        except Exception as e:
            log.exception("loading the model failed")
            self.status, self.error = "error", f"{type(e).__name__}: {e}"
            if on_failure is not None:
                on_failure()
