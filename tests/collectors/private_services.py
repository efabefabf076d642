"""A private Postgres cluster and a private Redis on free loopback ports, for tests that stop and restart
them. The machine's shared servers (other suites, CI) are never touched.

Needs `initdb`/`pg_ctl` (PATH, /usr/local/bin or Debian's /usr/lib/postgresql/*/bin) and `redis-server`;
`require_binaries()` skips the test with the reason when one is missing. Postgres refuses to run as root,
so as root the cluster runs as the `postgres` system user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.engine.server.helpers import free_port, wait_for


def _find(name: str) -> str | None:
    found = shutil.which(name) or shutil.which(name, path="/usr/local/bin")
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def require_binaries() -> dict[str, str]:
    paths = {name: _find(name) for name in ("initdb", "pg_ctl", "redis-server")}
    missing = [name for name, path in paths.items() if path is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} to run a private Postgres/Redis (not found on PATH)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a 'postgres' user: initdb refuses to run as root")
    return {k: v for k, v in paths.items() if v}


class PrivatePostgres:
    """initdb once; start/stop at will on one port. Durability off: this cluster lives for one test."""

    def __init__(self, initdb: str, pg_ctl: str) -> None:
        self.pg_ctl = pg_ctl
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="spectator-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.log = self.dir / "server.log"
        self._run(initdb, "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *cmd: str) -> None:
        done = subprocess.run(cmd, user=self.user, capture_output=True, text=True, timeout=120, cwd=self.dir)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off "
                   "-c full_page_writes=off -c synchronous_commit=off")
        self._run(self.pg_ctl, "-D", str(self.dir / "data"), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                  "start")

    def stop(self) -> None:
        # fast: disconnect every client at once, as a crash or failover would
        self._run(self.pg_ctl, "-D", str(self.dir / "data"), "-m", "fast", "-w", "-t", "60", "stop")

    def destroy(self) -> None:
        subprocess.run([self.pg_ctl, "-D", str(self.dir / "data"), "-m", "immediate", "stop"], user=self.user,
                       capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """`redis-server --save ''` on one port; a restart loses everything in it, as a cache node's would."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_for(up, 30, "the private redis-server to answer")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
