"""`manage.py run` — what `make run` starts: the whole loop on one machine, on 127.0.0.1.

1. Migrate; create or update the admin user (password from SPECTATOR_ADMIN_PASSWORD[_FILE], else one
   generated once and kept in DATA_DIR/admin-password, mode 0600).
2. Start the bundled engine (tiny model on CPU; the small one on GPU when CUDA is present) and wait
   for its /health; register it as the server "bundled-engine".
3. Start a Celery worker, Celery beat and the Django web server as child processes; print the URL
   and the login.
4. Ctrl-C (SIGINT) or SIGTERM stops every child (TERM, then KILL after a grace period); a child that
   dies on its own stops the others too, and the exit status says so.
It installs nothing: `make run` has done that.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.models import Server
from collectors.plans import DEFAULT_PLAN, SMALL_PLAN
from dashboard.env import envint, envsecret, envstr

ENGINE_NAME = "bundled-engine"
GRACE_S = 15.0
ENGINE_START_TIMEOUT_S = 300.0


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def ensure_admin(username: str) -> tuple[str, str]:
    """(username, password) of a superuser that exists afterwards."""
    password = envsecret("SPECTATOR_ADMIN_PASSWORD")
    kept = Path(settings.DATA_DIR) / "admin-password"
    if not password:
        if kept.exists():
            password = kept.read_text().strip()
        else:
            password = secrets.token_urlsafe(12)
            kept.write_text(password + "\n")
            kept.chmod(0o600)
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first() or user_model(username=username)
    user.is_staff = user.is_superuser = user.is_active = True
    user.set_password(password)
    user.save()
    return username, password


def share_metrics_folder() -> dict[str, str]:
    """The environment that makes the web and worker children write their counters to one folder, so /metrics
    sums them (issue 8). Taken out of this process's environment: the engine child must not write there."""
    chosen = os.environ.pop("PROMETHEUS_MULTIPROC_DIR", "")
    folder = Path(chosen or Path(settings.DATA_DIR) / "metrics")
    if not chosen:
        shutil.rmtree(folder, ignore_errors=True)  # last run's processes are gone; their totals restart
    folder.mkdir(parents=True, exist_ok=True)
    return {"PROMETHEUS_MULTIPROC_DIR": str(folder)}


class Command(BaseCommand):
    help = "Run the bundled engine, a Celery worker, Celery beat and the web server until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--web-port", type=int, default=envint("SPECTATOR_WEB_PORT", 8000, minimum=1))
        parser.add_argument("--engine-port", type=int, default=envint("SPECTATOR_ENGINE_PORT", 30000, minimum=1))
        parser.add_argument("--no-engine", action="store_true", help="don't start or register the bundled engine")
        parser.add_argument("--worker-concurrency", type=int, default=envint("SPECTATOR_WORKER_CONCURRENCY", 2))

    def handle(self, *args: Any, **opts: Any) -> None:
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.stopping = False
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        call_command("migrate", interactive=False, verbosity=0)
        username, password = ensure_admin(envstr("SPECTATOR_ADMIN_USER", "admin"))
        metrics_env = share_metrics_folder()
        try:
            if not opts["no_engine"]:
                self._start_engine(opts["engine_port"])
            self._start_services(opts["web_port"], opts["worker_concurrency"], metrics_env)
            web = f"http://127.0.0.1:{opts['web_port']}"
            self.stdout.write(self.style.SUCCESS(
                f"\nSpectator is running.\n  site:   {web}/   (admin: {web}/admin/, health: {web}/health)\n"
                f"  login:  {username} / {password}\n  data:   {settings.DATA_DIR}\n"
                "Ctrl-C stops everything.\n"
            ))
            status = self._watch()
        finally:
            self._stop_all()
        if status:
            raise CommandError(status)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        # Own session: the terminal's Ctrl-C reaches only us, and we stop the children in order.
        proc = subprocess.Popen(cmd, cwd=settings.BASE_DIR, env={**os.environ, **(env or {})}, start_new_session=True)
        self.children.append((name, proc))
        return proc

    def _start_engine(self, port: int) -> None:
        gpu = cuda_available()
        models = Path(settings.BASE_DIR) / "engine" / "models" / ("small" if gpu else "tiny")
        cmd = [sys.executable, "-m", "engine", "serve", "--model", str(models / "target"), "--draft",
               str(models / "draft"), "--device", "cuda" if gpu else "cpu", "--host", "127.0.0.1", "--port", str(port)]
        self.stdout.write(f"starting the bundled engine ({models.name} model on {'GPU' if gpu else 'CPU'}) on :{port}")
        proc = self._spawn("engine", cmd)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
        while not self.stopping:
            if proc.poll() is not None:
                raise CommandError(f"the engine exited with status {proc.returncode} before it was ready")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise CommandError(f"the engine did not become healthy within {ENGINE_START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        server = Server.objects.filter(name=ENGINE_NAME).first() or Server(name=ENGINE_NAME)
        server.base_url, server.kind, server.enabled = url, Server.Kind.DDTREE, True
        server.probe_plan = DEFAULT_PLAN if gpu else SMALL_PLAN
        server.probe_interval_s, server.scrape_interval_s = (900, 15)
        server.next_probe_at = server.next_scrape_at = None  # probe and scrape at the first tick
        server.full_clean()
        server.save()

    def _start_services(self, web_port: int, concurrency: int, metrics_env: dict[str, str]) -> None:
        celery = [sys.executable, "-m", "celery", "-A", "dashboard"]
        self._spawn("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", str(concurrency),
                               "--without-gossip", "--without-mingle", "-n", "spectator@%h"], metrics_env)
        self._spawn("beat", [*celery, "beat", "--loglevel", "INFO", "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME])
        # --insecure: serve the admin's static files without DEBUG (a loopback-only, single-user site).
        self._spawn("web", [sys.executable, "manage.py", "runserver", f"127.0.0.1:{web_port}", "--noreload",
                            "--insecure"], metrics_env)

    def _watch(self) -> str:
        while not self.stopping:
            for name, proc in self.children:
                if proc.poll() is not None:
                    return f"{name} exited with status {proc.returncode}; stopped the others"
            time.sleep(0.5)
        return ""

    def _stop_all(self) -> None:
        # Web, beat and worker first (a task in flight finishes against a live engine), the engine last.
        services = [(n, p) for n, p in reversed(self.children) if n != "engine"]
        engine = [(n, p) for n, p in self.children if n == "engine"]
        for group in (services, engine):
            for _, proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + GRACE_S
            for name, proc in group:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.stderr.write(f"{name} did not stop within {GRACE_S:.0f} s; killing it")
                    proc.kill()
                    proc.wait()
        if self.children:
            self.stdout.write("stopped: " + ", ".join(name for name, _ in self.children))
