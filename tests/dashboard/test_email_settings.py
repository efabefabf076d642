"""E-mail settings come from the environment: console without EMAIL_HOST, SMTP with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT = ("import json, dashboard.settings as s; print(json.dumps([s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, "
         "s.EMAIL_USE_TLS, s.EMAIL_HOST_PASSWORD, s.DEFAULT_FROM_EMAIL, s.SPECTATOR_SITE_URL]))")


def _settings(tmp_path: Path, **env: str) -> list[object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EMAIL_", "DEFAULT_FROM", "SPECTATOR_SITE"))}
    out = subprocess.run([sys.executable, "-c", PRINT], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**clean, "SPECTATOR_DATA_DIR": str(tmp_path), **env})
    return json.loads(out.stdout)


def test_it_prints_mails_to_the_console_without_an_smtp_host(tmp_path: Path) -> None:
    backend, host, port, tls, *_ = _settings(tmp_path)
    assert backend == "django.core.mail.backends.console.EmailBackend" and host == ""
    assert (port, tls) == (587, True)


def test_it_sends_over_smtp_with_a_password_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "smtp-password"
    secret.write_text("s3cret\n")
    got = _settings(tmp_path, EMAIL_HOST="smtp.example.org", EMAIL_USE_TLS="0", EMAIL_HOST_PASSWORD_FILE=str(secret),
                    DEFAULT_FROM_EMAIL="spectator@example.org", SPECTATOR_SITE_URL="https://spectator.example.org/")
    assert got == ["django.core.mail.backends.smtp.EmailBackend", "smtp.example.org", 25, False, "s3cret",
                   "spectator@example.org", "https://spectator.example.org"]
