"""The commands in Dockerfile and docker-compose.yml refer to things that exist, and the web command
really serves: gunicorn loads the WSGI module, WhiteNoise serves the collected static files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.compose import ROOT, config
from tests.engine.server.helpers import free_port, wait_for

DOCKERFILE = (ROOT / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return config(tmp_path_factory.mktemp("compose"))["services"]


def test_it_builds_from_files_that_exist() -> None:
    assert re.search(r"^FROM \S+ AS app$", DOCKERFILE, re.M) and re.search(r"^FROM \S+ AS engine$", DOCKERFILE, re.M)
    for line in re.findall(r"^COPY (.+) \S+$", DOCKERFILE, re.M):
        for name in line.split():
            assert (ROOT / name).exists(), name
    assert os.access(ROOT / "docker-entrypoint.sh", os.X_OK)
    extras = re.findall(r"pip install -e '\.\[(\w+)\]'", DOCKERFILE)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert extras == ["dashboard", "engine"] and all(f"\n{e} = [" in pyproject for e in extras)


def test_it_points_gunicorn_at_the_wsgi_application(services: dict[str, Any]) -> None:
    import importlib

    command = services["web"]["command"]
    assert command[0] == "gunicorn"
    module = importlib.import_module(command[1])
    assert callable(module.application)
    assert '"gunicorn", "dashboard.wsgi"' in DOCKERFILE  # the image's default command is the same


def test_it_starts_celery_with_the_project_app(services: dict[str, Any]) -> None:
    from dashboard.celery import app

    for name, sub in (("worker", "worker"), ("beat", "beat")):
        command = services[name]["command"]
        assert command[:4] == ["celery", "-A", "dashboard", sub], name
    app.loader.import_default_modules()  # what a worker does at start: autodiscover the tasks
    assert app.main == "dashboard" and "collectors.tasks.probe" in app.tasks
    # The worker healthcheck pings the node name the command gives it.
    assert "spectator@%h" in services["worker"]["command"]
    probe = services["worker"]["healthcheck"]["test"][1]
    assert re.search(r"--destination spectator@\$+HOSTNAME", probe)  # the parser keeps $$ escaped


def test_it_runs_management_commands_that_exist(services: dict[str, Any]) -> None:
    from django.core.management import get_commands

    command = services["migrate"]["command"]
    assert command[:2] == ["python", "manage.py"] and command[2] in get_commands()
    assert "add_server" in get_commands()  # the compose file's comment registers the engine with it


def test_it_configures_the_engine_with_known_flags_and_bundled_models(services: dict[str, Any]) -> None:
    from engine.server.config import FLAGS, env_name

    known = {env_name(flag) for flag, *_ in FLAGS}
    for name in ("engine", "engine-cpu"):
        env = services[name]["environment"]
        assert set(env) <= known, set(env) - known
        for key in ("ENGINE_MODEL", "ENGINE_DRAFT"):
            assert (ROOT / env[key].removeprefix("/app/") / "config.json").exists(), env[key]


@pytest.fixture
def static_root(tmp_path: Path) -> Path:
    folder = tmp_path / "static"
    env = {**os.environ, "SPECTATOR_STATIC_ROOT": str(folder)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"], cwd=ROOT,
                   env=env, check=True, timeout=120)
    return folder


@pytest.fixture
def gunicorn(transactional_db: Any, static_root: Path, tmp_path: Path,
             services: dict[str, Any]) -> Iterator[tuple[str, dict[str, str]]]:
    """The web service's own command line on a loopback port, against the test database."""
    from tests.collectors.live import database_url

    port = free_port()
    command = list(services["web"]["command"])
    command[command.index("--bind") + 1] = f"127.0.0.1:{port}"
    command[command.index("--workers") + 1] = "2"
    env = {**os.environ, "DATABASE_URL": database_url(), "SPECTATOR_STATIC_ROOT": str(static_root),
           "SPECTATOR_METRICS_TOKEN": "token-for-the-test", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    (tmp_path / "metrics").mkdir()
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            return httpx.get(url + "/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, 60, "gunicorn to serve /health")
        yield url, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_it_serves_the_site_and_its_static_files_from_gunicorn(gunicorn: tuple[str, dict[str, str]]) -> None:
    url, _ = gunicorn
    css = httpx.get(url + "/static/admin/css/base.css", timeout=10)
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]  # WhiteNoise, from STATIC_ROOT
    assert httpx.get(url + "/", timeout=10).headers["location"].startswith("/login/")
    assert httpx.get(url + "/metrics", timeout=10).status_code == 403
    metrics = httpx.get(url + "/metrics", headers={"Authorization": "Bearer token-for-the-test"}, timeout=10)
    assert metrics.status_code == 200 and "spectator_servers" in metrics.text
