"""Production settings (issue 8): secure cookies, HSTS and the HTTPS redirect when DEBUG is off on a public
site, SECRET_KEY required, `manage.py check --deploy` clean; and `make run` on 127.0.0.1 left on plain HTTP."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.engine.server.helpers import ROOT

PUBLIC = {"ALLOWED_HOSTS": "spectator.example.org", "SECRET_KEY": secrets.token_urlsafe(50)}
NAMES = ["DEBUG", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
         "SECURE_PROXY_SSL_HEADER", "SPECTATOR_HTTPS"]


def _env(extra: dict[str, str]) -> dict[str, str]:
    keep = ("PATH", "HOME", "DATABASE_URL", "CELERY_BROKER_URL", "SPECTATOR_DATA_DIR")
    return {**{k: v for k, v in os.environ.items() if k in keep}, **extra}


def _settings(extra: dict[str, str]) -> dict[str, Any]:
    code = ("import json, django; from django.conf import settings; django.setup(); "
            f"print(json.dumps({{n: getattr(settings, n, None) for n in {NAMES!r}}}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**_env(extra), "DJANGO_SETTINGS_MODULE": "dashboard.settings"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _check(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=_env(extra))


def test_it_turns_on_https_protections_for_a_public_site_with_debug_off() -> None:
    s = _settings(PUBLIC)
    assert s["SESSION_COOKIE_SECURE"] and s["CSRF_COOKIE_SECURE"] and s["SECURE_SSL_REDIRECT"]
    assert s["SECURE_HSTS_SECONDS"] == 31_536_000
    assert s["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]  # TLS ends at the reverse proxy


def test_it_leaves_a_loopback_install_on_plain_http() -> None:
    s = _settings({})
    assert not (s["SESSION_COOKIE_SECURE"] or s["SECURE_SSL_REDIRECT"] or s["SECURE_HSTS_SECONDS"])


def test_it_lets_an_operator_turn_https_off_and_says_so() -> None:
    s = _settings({**PUBLIC, "SPECTATOR_HTTPS": "false"})
    assert not s["SESSION_COOKIE_SECURE"] and s["SECURE_HSTS_SECONDS"] == 0
    done = _check({**PUBLIC, "SPECTATOR_HTTPS": "false"})
    assert done.returncode != 0 and "spectator.W004" in done.stderr


def test_it_passes_djangos_deployment_checks_when_configured_for_production() -> None:
    # Out of the box, only the two HSTS opt-ins remain: they bind every subdomain, so the operator decides.
    done = _check(PUBLIC)
    assert set(re.findall(r"\(([\w.]+)\)", done.stderr)) == {"security.W005", "security.W021"}, done.stderr
    done = _check({**PUBLIC, "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true", "SECURE_HSTS_PRELOAD": "true"})
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.mark.parametrize("secret, code", [({}, "spectator.E001"), ({"SECRET_KEY": "short"}, "spectator.E006")])
def test_it_requires_a_real_secret_key_in_production(secret: dict[str, str], code: str) -> None:
    done = _check({"ALLOWED_HOSTS": "spectator.example.org", **secret})
    assert done.returncode != 0 and code in done.stderr


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True, SECURE_HSTS_SECONDS=31_536_000, SESSION_COOKIE_SECURE=True,
                   CSRF_COOKIE_SECURE=True, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
def test_it_redirects_to_https_and_sends_hsts_and_secure_cookies() -> None:
    client = Client()
    r = client.get("/login/")
    assert r.status_code == 301 and r["Location"] == "https://testserver/login/"
    assert client.get("/health").status_code == 200  # health checks over plain HTTP inside the network
    r = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")  # as the TLS proxy forwards it
    assert r.status_code == 200
    assert r["Strict-Transport-Security"] == "max-age=31536000"
    assert r.cookies["csrftoken"]["secure"] and r["X-Frame-Options"] == "DENY"
