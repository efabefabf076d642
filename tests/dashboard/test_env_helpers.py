from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import database_from_url, envbool, envint, envlist, envsecret


def test_it_reads_booleans_and_rejects_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "yes")
    assert envbool("X_FLAG", False) is True
    monkeypatch.setenv("X_FLAG", "0")
    assert envbool("X_FLAG", True) is False
    monkeypatch.delenv("X_FLAG")
    assert envbool("X_FLAG", True) is True
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        envbool("X_FLAG", False)


def test_it_reads_integers_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert envint("X_INT", 7) == 7
    monkeypatch.setenv("X_INT", "42")
    assert envint("X_INT", 7, minimum=1) == 42
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ImproperlyConfigured, match="below the minimum"):
        envint("X_INT", 7, minimum=1)
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        envint("X_INT", 7)


def test_it_reads_secrets_from_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    monkeypatch.delenv("X_SECRET", raising=False)
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert envsecret("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET", "direct")
    assert envsecret("X_SECRET") == "direct"
    monkeypatch.delenv("X_SECRET")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_SECRET_FILE"):
        envsecret("X_SECRET")


def test_it_splits_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert envlist("X_LIST", []) == ["a", "b", "c"]


def test_it_parses_database_urls() -> None:
    pg = database_from_url("postgres://user:p%40ss@db.local:5433/spectator")
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "spectator", "user", "p@ss", "db.local", "5433"
    )
    assert database_from_url("sqlite:////var/lib/x.sqlite3")["NAME"] == "/var/lib/x.sqlite3"
    assert database_from_url("sqlite:///rel.sqlite3")["NAME"] == "rel.sqlite3"
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://x/y")
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        database_from_url("postgres://host/")
