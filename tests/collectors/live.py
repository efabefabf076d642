"""Real parts on loopback for the integration tests: the bundled engine (tiny, CPU) and Celery worker
processes that share the test database and broker with this pytest process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.engine.server.helpers import ROOT, Server, start_server, stop_server, wait_for

SMALL_PLAN = {"contexts": [64, 256], "outputs": [], "n1": 16, "n2": 64, "repeats": 1, "stream_check": False}


def database_url() -> str:
    """The URL of the database this test runs on (the test database, once pytest-django made it)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Workers:
    """Celery worker processes on a queue of their own, so nothing else's messages reach them."""

    def __init__(self) -> None:
        self.queue = f"test-{uuid.uuid4().hex[:8]}"
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        from dashboard.celery import app

        self._app = app
        self._previous_queue = app.conf.task_default_queue
        self._publish_to(self.queue)

    def _publish_to(self, queue: str) -> None:
        # What this process publishes to. Under the CELERY namespace, Celery 5.6 reads the prefixed key.
        self._app.conf.task_default_queue = queue
        self._app.conf.CELERY_TASK_DEFAULT_QUEUE = queue

    def start(self, name: str, env_extra: dict[str, str] | None = None, **extra_env: str) -> subprocess.Popen[bytes]:
        """Start one worker (`extra_env`: settings for it alone, e.g. SPECTATOR_PROBE_LOCK_TTL) and wait until
        it is ready; returns its process (the main one: the task runs in its one pool child)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
        env.update(
            DATABASE_URL=database_url(),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            SPECTATOR_DATA_DIR=str(settings.DATA_DIR),
            SPECTATOR_CELERY_QUEUE=self.queue,
            SPECTATOR_PROBE_TIME_LIMIT="120",
            OMP_NUM_THREADS="1",
            **extra_env,
        )
        env.update(env_extra or {})
        log = Path(tempfile.mkstemp(prefix=f"celery-{name}-", suffix=".log")[1])
        cmd = [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-Q", self.queue, "-c", "1",
               "-n", f"{name}-{self.queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
               "--loglevel", "INFO"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((proc, log))

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"worker exited with {proc.returncode}:\n{log.read_text()}")
            return " ready." in log.read_text(errors="replace")

        wait_for(ready, 60, f"worker {name} to be ready")
        return proc

    def log_text(self) -> str:
        return "\n".join(log.read_text(errors="replace") for _, log in self.procs)

    def logs(self) -> str:
        return "\n".join(log.read_text(errors="replace")[-4000:] for _, log in self.procs)

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # Retries waiting on a countdown went back to the queue when the workers stopped: drop them.
        with self._app.connection_for_write() as conn:
            conn.default_channel.queue_purge(self.queue)
            conn.default_channel.queue_delete(self.queue)  # and its bindings, on Redis
        self._publish_to(self._previous_queue)


@pytest.fixture
def workers(transactional_db: Any) -> Iterator[Workers]:
    # Depends on transactional_db so the workers stop before the test database is flushed.
    w = Workers()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def engine() -> Iterator[Server]:
    server = start_server()
    yield server
    stop_server(server)
