"""Runs Debian's docker-compose (a real compose parser; no Docker daemon needed for `config`) on a copy of
docker-compose.yml, with an .env of our choosing, and returns the parsed, interpolated result."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV = {"SECRET_KEY": "s" * 50, "POSTGRES_PASSWORD": "pw-for-the-test"}


def compose(args: list[str], folder: Path, text: str | None = None, env: dict[str, str] | None = None,
            profiles: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is missing: `make install` installs Debian's package"
    (folder / "docker-compose.yml").write_text(COMPOSE_FILE.read_text() if text is None else text)
    (folder / ".env").write_text("".join(f"{k}={v}\n" for k, v in (ENV if env is None else env).items()))
    cmd = [exe, "-f", str(folder / "docker-compose.yml")]
    for profile in profiles:
        cmd += ["--profile", profile]
    # A clean environment: only the .env file may feed the interpolation.
    return subprocess.run([*cmd, *args], cwd=folder, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(folder)})


def config(folder: Path, profiles: tuple[str, ...] = ("gpu", "cpu")) -> dict[str, Any]:
    done = compose(["config"], folder, profiles=profiles)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)
