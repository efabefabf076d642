"""Tiny typed readers for environment variables (healthchecks `hc/settings.py` style).

Each one raises ImproperlyConfigured naming the variable when a value is set but bad, so a typo
stops the process at start-up instead of surfacing at 3 a.m. Secrets may also come from a file
named by `NAME_FILE` (Docker/Kubernetes secrets), which wins over nothing but loses to `NAME`.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def envsecret(name: str, default: str = "") -> str:
    """`NAME`, else the contents of the file named by `NAME_FILE` (stripped), else `default`."""
    if name in os.environ:
        return os.environ[name]
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from exc
    return default


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def envint(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def envfloat(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a finite number")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    """A Django DATABASES entry from `sqlite:///abs/path` or `postgres://user:pw@host:port/name`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        # sqlite:////abs/path.sqlite3 → /abs/path.sqlite3; sqlite:///rel → rel
        name = unquote(parts.path[1:])
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no SQLite file")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "OPTIONS": {"timeout": 30}}
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured("DATABASE_URL names no database (postgres://user@host:5432/NAME)")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not supported (use postgres:// or sqlite://)")


def cache_from_url(url: str, *, key_prefix: str) -> dict[str, object]:
    """A Django CACHES entry from `redis://host:6379/1` (Django's Redis backend), `file:///abs/dir` or `locmem://`."""
    parts = urlsplit(url)
    if parts.scheme in {"redis", "rediss"}:
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": key_prefix}
    if parts.scheme == "file":
        if not parts.path:
            raise ImproperlyConfigured(f"CACHE_URL={url!r} names no folder (file:///abs/dir)")
        return {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": unquote(parts.path),
                "KEY_PREFIX": key_prefix}
    if parts.scheme == "locmem":
        # One process only: rate limits would not be shared between web workers. For tests and experiments.
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "KEY_PREFIX": key_prefix}
    raise ImproperlyConfigured(f"CACHE_URL scheme {parts.scheme!r} is not supported (use redis://, file:// or locmem://)")
