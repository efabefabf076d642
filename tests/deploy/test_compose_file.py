"""docker-compose.yml is valid for a real compose parser, and has the shape issue 8 asks for."""

from __future__ import annotations

from pathlib import Path

from tests.deploy.compose import COMPOSE_FILE, compose, config

APP_SERVICES = ("migrate", "web", "worker", "beat")


def test_it_validates_the_compose_file_with_a_real_compose_parser(tmp_path: Path) -> None:
    done = compose(["config", "-q"], tmp_path, profiles=("gpu", "cpu"))
    assert done.returncode == 0, done.stderr


def test_it_rejects_a_broken_compose_file(tmp_path: Path) -> None:
    # The parser really checks: a copy with a wrong type (a healthcheck that is a number) fails…
    redis_check = '    healthcheck:\n      test: ["CMD", "redis-cli", "ping"]'
    broken = COMPOSE_FILE.read_text().replace(redis_check, '    healthcheck: 5\n    x-was:\n      test: ["CMD"]')
    assert broken != COMPOSE_FILE.read_text()
    done = compose(["config", "-q"], tmp_path, text=broken)
    assert done.returncode != 0 and "healthcheck" in done.stderr
    # …and so does one that is not YAML at all.
    done = compose(["config", "-q"], tmp_path, text=COMPOSE_FILE.read_text() + "\n  web: [unclosed\n")
    assert done.returncode != 0


def test_it_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    done = compose(["config", "-q"], tmp_path, env={"POSTGRES_PASSWORD": "pw"})
    assert done.returncode != 0 and "set SECRET_KEY in .env" in done.stderr


def test_it_runs_web_worker_beat_and_migrate_from_one_image_with_different_commands(tmp_path: Path) -> None:
    services = config(tmp_path)["services"]
    images = {services[name]["image"] for name in APP_SERVICES}
    builds = {(services[name]["build"]["target"]) for name in APP_SERVICES}
    assert images == {"spectator-app:latest"} and builds == {"app"}
    commands = [tuple(services[name]["command"]) for name in APP_SERVICES]
    assert len(set(commands)) == len(APP_SERVICES)
    # Only the command (and what follows from it: ports, healthcheck, start order) differs.
    same = ("environment", "volumes", "restart", "image", "build")
    for name in APP_SERVICES[1:]:
        assert {k: services[name].get(k) for k in same if k != "restart"} == \
            {k: services["migrate"].get(k) for k in same if k != "restart"}, name
    assert services["web"]["environment"]["DATABASE_URL"] == \
        "postgres://spectator:pw-for-the-test@postgres:5432/spectator"
    assert services["web"]["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"


def test_it_has_healthchecks_volumes_and_the_smtp_catcher(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    services = cfg["services"]
    for name in ("postgres", "redis", "web", "worker", "beat", "mailpit", "engine", "engine-cpu"):
        assert services[name]["healthcheck"]["test"], name
    assert {"pgdata", "redisdata", "spectator-data", "metrics"} <= set(cfg["volumes"])
    assert any(v.startswith("pgdata:") for v in services["postgres"]["volumes"])
    assert services["web"]["environment"]["EMAIL_HOST"] == "mailpit"
    # Its web UI, published on the host's loopback only (it shows every mail to whoever reaches it).
    assert services["mailpit"]["ports"] == ["127.0.0.1:8025:8025/tcp"]


def test_it_reserves_a_gpu_for_the_engine_and_has_a_cpu_profile(tmp_path: Path) -> None:
    services = config(tmp_path)["services"]
    gpu, cpu = services["engine"], services["engine-cpu"]
    device = gpu["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["capabilities"] == ["gpu"] and device["driver"] == "nvidia"
    assert gpu["profiles"] == ["gpu"] and cpu["profiles"] == ["cpu"]
    assert "deploy" not in cpu and cpu["environment"]["ENGINE_DEVICE"] == "cpu"
    assert gpu["image"] == cpu["image"] and gpu["build"]["target"] == "engine"
    # Either one answers as http://engine:30000 on the compose network.
    assert "engine" in cpu["networks"]["default"]["aliases"]
    # Without a profile no engine starts (a monitoring-only deployment needs no torch image): the engines are
    # the only services behind a profile.
    assert {name for name, svc in services.items() if svc.get("profiles")} == {"engine", "engine-cpu"}
