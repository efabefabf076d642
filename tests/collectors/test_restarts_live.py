"""Postgres and Redis restart under a running worker and beat (private servers; the shared ones are left
alone). Postgres: the probe that was running when the database went away retries, its interrupted run
ends `failed` (worker lost) with one replacement that succeeds, and the schedule goes on. Redis (all
queued messages and locks lost with it): worker and beat reconnect by themselves and the schedule resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from collectors.probing import WORKER_LOST
from tests.collectors.live import SMALL_PLAN
from tests.collectors.private_services import PrivatePostgres, PrivateRedis, require_binaries
from tests.engine.server.helpers import ROOT, wait_for

PLAN = {**SMALL_PLAN, "contexts": [64, 256, 512], "repeats": 2}
CREATE_SERVER = """
from collectors.models import Server
Server.objects.create(name="tiny", base_url={url!r}, kind="ddtree", probe_plan={plan},
                      probe_interval_s=8, scrape_interval_s=2)
"""


class Stack:
    """Private Postgres + Redis, a Celery worker (2 pool processes) and beat (1 s ticks) on them."""

    def __init__(self, pg: PrivatePostgres, redis: PrivateRedis, data_dir: Path) -> None:
        self.pg, self.redis, self.data_dir = pg, redis, data_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
        self.env.update(DATABASE_URL=pg.url, CELERY_BROKER_URL=redis.url, SPECTATOR_DATA_DIR=str(data_dir),
                        SPECTATOR_TICK_SECONDS="1", SPECTATOR_PROBE_LOCK_TTL="6", SPECTATOR_PROBE_TIME_LIMIT="120",
                        OMP_NUM_THREADS="1")
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def manage(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr

    def spawn(self, name: str, *args: str) -> None:
        log = self.data_dir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "dashboard", *args, "--loglevel", "INFO"],
                                    cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs[name] = (proc, log)

    def log(self, name: str) -> str:
        return self.procs[name][1].read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-3000:]}" for name in self.procs)

    def alive(self) -> None:
        for name, (proc, _) in self.procs.items():
            assert proc.poll() is None, f"{name} exited with {proc.returncode}:\n{self.logs()}"

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]] | None:
        """Rows from the private database, or None while it is down."""
        try:
            with psycopg.connect(self.pg.url, autocommit=True, connect_timeout=3) as conn:
                return conn.execute(sql, params).fetchall()
        except psycopg.OperationalError:
            return None

    def stop(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def stack() -> Iterator[Stack]:
    binaries = require_binaries()
    pg = PrivatePostgres(binaries["initdb"], binaries["pg_ctl"])
    redis = PrivateRedis(binaries["redis-server"])
    s = Stack(pg, redis, Path(tempfile.mkdtemp(prefix="spectator-restarts-")))
    try:
        pg.start()
        redis.start()
        s.manage("migrate", "--noinput")
        yield s
    finally:
        s.stop()
        redis.stop()
        pg.destroy()


def test_it_survives_a_postgres_and_a_redis_restart(engine: Any, stack: Stack) -> None:
    stack.manage("shell", "-c", CREATE_SERVER.format(url=engine.url, plan=repr(PLAN)))
    stack.spawn("worker", "worker", "-c", "2", "-n", "restarts@%h", "--without-gossip", "--without-mingle",
                "--without-heartbeat")
    stack.spawn("beat", "beat", "-s", str(stack.data_dir / "celerybeat-schedule"))
    wait_for(lambda: stack.alive() or " ready." in stack.log("worker"), 90, "the worker to be ready")

    def probing() -> int | None:
        stack.alive()
        rows = stack.query("select id from collectors_proberun where status = 'running' "
                           "and current_step like 'two-point%%'")
        return rows[0][0] if rows else None

    # --- Postgres goes away in the middle of a probe --------------------------------------------------
    interrupted = wait_for(probing, 120, "a scheduled probe to be measuring")
    scrapes_before = stack.query("select max(id) from collectors_scrape")[0][0] or 0
    stack.pg.stop()
    wait_for(lambda: "database unavailable (" in stack.log("worker"), 120,
             "a task to meet the database outage and retry")
    stack.pg.start()
    back = stack.query("select now()")[0][0]

    def replaced() -> tuple[Any, ...] | None:
        rows = stack.query("select r.status, r.error, n.status, n.error from collectors_proberun r "
                           "join collectors_proberun n on n.retry_of_id = r.id where r.id = %s", interrupted)
        return rows[0] if rows and rows[0][2] in ("succeeded", "failed", "skipped") else None

    status, error, replacement_status, replacement_error = wait_for(replaced, 180, "the replacement run to end")
    assert status == "failed" and error.startswith(WORKER_LOST), (status, error)
    # Run by the retried message itself (it holds the lock: succeeded), or enqueued by the beat's sweep, which
    # a scheduled probe of the same server may beat to the lock (skipped, like any probe of a busy server).
    assert replacement_status == "succeeded" or (
        replacement_status == "skipped" and replacement_error == "another probe is running on this server"
    ), (replacement_status, replacement_error, stack.logs())
    assert stack.query("select count(*) from collectors_proberun where retry_of_id = %s", interrupted)[0][0] == 1
    wait_for(lambda: stack.query("select count(*) from collectors_proberun where status = 'succeeded' "
                                 "and started_at > %s", back)[0][0] >= 1, 180, "a probe to succeed after the restart")
    wait_for(lambda: stack.query("select count(*) from collectors_scrape where ok and id > %s",
                                 scrapes_before)[0][0] >= 2, 60, "scrapes to resume after the restart")

    # --- Redis goes away (queue and locks with it) ---------------------------------------------------------
    stack.alive()
    marker = stack.query("select now()")[0][0]
    stack.redis.stop()
    wait_for(lambda: "Trying to re-establish the connection" in stack.log("worker")
             or "Cannot connect to redis" in stack.log("worker"), 60, "the worker to notice the lost broker")
    stack.redis.start()

    def resumed() -> bool:
        stack.alive()
        scrapes = stack.query("select count(*) from collectors_scrape where ok and at > %s", marker)
        probes = stack.query("select count(*) from collectors_proberun where status = 'succeeded' "
                             "and queued_at > %s", marker)
        return bool(scrapes and probes and scrapes[0][0] >= 2 and probes[0][0] >= 1)

    wait_for(resumed, 180, "scheduled scrapes and a probe to succeed after the Redis restart")
    stuck = stack.query("select id, status from collectors_proberun where status = 'running' "
                        "and started_at < %s", marker)
    assert stuck == [], "a run left running across the restarts"
