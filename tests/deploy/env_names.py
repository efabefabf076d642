"""Every environment variable the project reads, found in its code (for the README reference test)."""

from __future__ import annotations

import re

from tests.deploy.compose import ROOT

# env helpers (dashboard/env.py), os.environ / os.getenv with a literal name, and ${NAME} in compose files.
PATTERNS = [
    re.compile(r"\benv(?:str|int|bool|list|secret)\(\s*\"([A-Z][A-Z0-9_]*)\""),
    re.compile(r"os\.environ(?:\.get)?\(\s*\"([A-Z][A-Z0-9_]*)\""),
    re.compile(r"os\.environ\[\"([A-Z][A-Z0-9_]*)\"\]"),
    re.compile(r"os\.getenv\(\s*\"([A-Z][A-Z0-9_]*)\""),
]
COMPOSE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)")
PACKAGES = ("dashboard", "collectors", "engine_client", "engine")


def names_in_code() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            for pattern in PATTERNS:
                found.update(pattern.findall(text))
    from engine.server.config import FLAGS, env_name

    found.update(env_name(flag) for flag, *_ in FLAGS)  # each engine flag's ENGINE_* twin
    found.update(COMPOSE.findall((ROOT / "docker-compose.yml").read_text()))
    found.discard("DJANGO_SETTINGS_MODULE")  # Django's own, set by manage.py/wsgi/celery
    return found
