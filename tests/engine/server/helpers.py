"""Helpers for server tests: start `python -m engine serve` (tiny models, CPU) on a free loopback port,
poll conditions with a timeout, and read /metrics through prometheus_client's parser."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "engine" / "models" / "tiny"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `condition` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    health_seen: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(*extra: str, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="engine-serve-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "engine", "serve", "--model", str(TINY / "target"), "--draft", str(TINY / "draft"),
           "--device", "cpu", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", *extra]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    # One torch thread: CI runners and dev boxes run other suites beside this one, and oversubscribed
    # intra-op threads slow every round by an order of magnitude.
    full_env.update({"OMP_NUM_THREADS": "1", **(env or {})})
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=full_env)
    server = Server(f"http://127.0.0.1:{port}", proc, log)

    def healthy() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{server.log()}")
        try:
            r = httpx.get(server.url + "/health", timeout=2)
        except httpx.TransportError:
            return False
        server.health_seen.append((r.status_code, r.json()))
        return r.status_code == 200

    wait_for(healthy, START_TIMEOUT_S, "/health to answer 200")
    return server


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def scrape(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics as {(sample name, sorted labels): value}, parsed by prometheus_client."""
    r = client.get("/metrics")
    assert r.status_code == 200
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def sample(samples: dict, name: str, **labels: str) -> float:
    """The value of one series with the server's model_name/algorithm labels (0 when absent)."""
    wanted = {"model_name": "tiny", "algorithm": "ddtree", **labels}
    return samples.get((name, tuple(sorted(wanted.items()))), 0.0)
