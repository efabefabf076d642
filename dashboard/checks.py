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
    problems += check_production()
    return problems


def _public() -> bool:
    return any(host not in LOCAL_HOSTS for host in settings.ALLOWED_HOSTS)


def check_production() -> list[Any]:
    """Issue 8: a site reachable from other machines must be configured like one."""
    import ipaddress

    from collectors.hosts import invalid_entries

    problems: list[Any] = []
    public = _public()
    if public and not settings.DEBUG and settings.SECRET_KEY != settings.DEFAULT_SECRET_KEY \
            and len(settings.SECRET_KEY) < 32:
        problems.append(Error(
            "SECRET_KEY is shorter than 32 characters on a public site.",
            hint="Generate one: python -c 'import secrets; print(secrets.token_urlsafe(50))'.",
            id="spectator.E006",
        ))
    for net in settings.SPECTATOR_METRICS_ALLOW_FROM:
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            problems.append(Error(
                f"SPECTATOR_METRICS_ALLOW_FROM entry {net!r} is not an IP address or network.",
                id="spectator.E007",
            ))
    for entry in invalid_entries(settings.SPECTATOR_ALLOWED_SERVER_HOSTS):
        problems.append(Error(
            f"SPECTATOR_ALLOWED_SERVER_HOSTS entry {entry!r} is neither a host name, a .domain nor a network.",
            id="spectator.E008",
        ))
    if public and settings.DEBUG:
        problems.append(Warning(
            "DEBUG is on while ALLOWED_HOSTS admits other hosts: error pages show settings and code.",
            hint="Unset DEBUG in production.",
            id="spectator.W003",
        ))
    if public and not settings.DEBUG and not settings.SPECTATOR_HTTPS:
        problems.append(Warning(
            "SPECTATOR_HTTPS is off on a public site: session and CSRF cookies travel in clear, no HSTS.",
            hint="Serve the site over HTTPS (a TLS reverse proxy) and leave SPECTATOR_HTTPS at its default.",
            id="spectator.W004",
        ))
    return problems
