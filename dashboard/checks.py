"""Misconfiguration as Django system checks with stable ids (healthchecks `hc/api/apps.py`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

SUPPORTED_BROKERS = ("filesystem://", "redis://", "rediss://")
LOCK_BACKENDS = ("auto", "redis", "db")
# Django's test client adds "testserver"; none of these is reachable from another machine.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "testserver")


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    if not settings.DEBUG and settings.SECRET_KEY == settings.DEFAULT_SECRET_KEY:
        bound_elsewhere = [h for h in settings.ALLOWED_HOSTS if h not in LOCAL_HOSTS]
        if bound_elsewhere:
            problems.append(Error(
                "SECRET_KEY is the built-in local default, but ALLOWED_HOSTS admits other hosts.",
                hint="Set SECRET_KEY or SECRET_KEY_FILE to a long random value.",
                id="spectator.E001",
            ))
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(SUPPORTED_BROKERS):
        problems.append(Error(
            f"CELERY_BROKER_URL scheme is not supported: {broker.split('://')[0]!r}.",
            hint="Use redis://host:6379/0, or leave it unset for the embedded filesystem broker.",
            id="spectator.E002",
        ))
    if settings.SPECTATOR_LOCK_BACKEND not in LOCK_BACKENDS:
        problems.append(Error(
            f"SPECTATOR_LOCK_BACKEND={settings.SPECTATOR_LOCK_BACKEND!r} is not one of {', '.join(LOCK_BACKENDS)}.",
            id="spectator.E003",
        ))
    elif settings.SPECTATOR_LOCK_BACKEND == "redis" and not broker.startswith(("redis://", "rediss://")):
        problems.append(Error(
            "SPECTATOR_LOCK_BACKEND=redis needs a Redis CELERY_BROKER_URL.",
            id="spectator.E004",
        ))
    sqlite = settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
    if sqlite and broker.startswith(("redis://", "rediss://")):
        problems.append(Warning(
            "Redis broker with a SQLite database: several workers will contend for the SQLite file.",
            hint="Set DATABASE_URL=postgres://… for a multi-worker deployment.",
            id="spectator.W001",
        ))
    if settings.SPECTATOR_PROBE_TIME_LIMIT <= settings.SPECTATOR_TICK_SECONDS:
        problems.append(Error(
            "SPECTATOR_PROBE_TIME_LIMIT must be longer than SPECTATOR_TICK_SECONDS.",
            id="spectator.E005",
        ))
    if settings.EMAIL_HOST and settings.DEFAULT_FROM_EMAIL.endswith("@localhost"):
        # Most SMTP relays refuse (or spam-file) a sender no one can reply to: alert mails would vanish.
        problems.append(Warning(
            "EMAIL_HOST is set but DEFAULT_FROM_EMAIL is still the local default.",
            hint="Set DEFAULT_FROM_EMAIL to an address your SMTP server accepts as sender.",
            id="spectator.W002",
        ))
    return problems
