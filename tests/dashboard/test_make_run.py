"""`manage.py run` (what `make run` starts) on the embedded default — SQLite and the filesystem broker,
no DATABASE_URL or CELERY_BROKER_URL — brings up engine, worker, beat and web; a probe of the bundled
engine gets stored with no one touching anything; Ctrl-C stops every child."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.engine.server.helpers import ROOT, free_port, wait_for


def default_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE") and not k.startswith("ENGINE_")}
    env.update(SPECTATOR_DATA_DIR=str(data_dir), SPECTATOR_TICK_SECONDS="1", SPECTATOR_ADMIN_PASSWORD="pw-for-tests",
               SPECTATOR_WORKER_CONCURRENCY="1", OMP_NUM_THREADS="1")
    return env


def query(db: Path, sql: str) -> list[tuple]:
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=10) as conn:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:  # tables not there yet, or locked for a moment
            return []


def test_it_runs_the_whole_loop_on_the_default_path_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    web, engine = free_port(), free_port()
    env = default_env(tmp_path)
    check = subprocess.run([sys.executable, "manage.py", "check", "--fail-level", "WARNING"], cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "run", "--web-port", str(web), "--engine-port",
                                 str(engine)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    db = tmp_path / "spectator.sqlite3"
    try:
        def healthy() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{web}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, 120, "the web server's /health")
        text = log.read_text()
        assert f"http://127.0.0.1:{web}/admin/" in text and "admin / pw-for-tests" in text
        sql = "SELECT status FROM collectors_proberun WHERE status IN ('succeeded', 'failed')"
        statuses = wait_for(lambda: query(db, sql), 120, "a finished probe run")
        assert statuses[0][0] == "succeeded", log.read_text()[-5000:]
        wait_for(lambda: query(db, "SELECT 1 FROM collectors_scrape WHERE ok"), 60, "a stored scrape")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("manage.py run did not stop within 60 s of SIGINT")
    assert code == 0, log.read_text()[-3000:]
    assert "stopped: engine, worker, beat, web" in log.read_text()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{engine}/health", timeout=2)
