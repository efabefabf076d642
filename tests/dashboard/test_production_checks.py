"""System checks added for issue 8 (dashboard/checks.py)."""

from __future__ import annotations

from django.test import override_settings

from dashboard.checks import check_settings

PUBLIC = {"DEBUG": False, "ALLOWED_HOSTS": ["spectator.example.org"], "SECRET_KEY": "k" * 50}


def ids() -> set[str]:
    return {problem.id for problem in check_settings()}


@override_settings(**PUBLIC, SPECTATOR_HTTPS=True)
def test_it_accepts_a_production_configuration() -> None:
    assert not ids()


@override_settings(**{**PUBLIC, "SECRET_KEY": "too-short"}, SPECTATOR_HTTPS=True)
def test_it_flags_a_short_secret_key_on_a_public_site() -> None:
    assert "spectator.E006" in ids()


@override_settings(SPECTATOR_METRICS_ALLOW_FROM=["10.0.0.0/8", "not-a-network"])
def test_it_flags_a_bad_metrics_allowlist_entry() -> None:
    assert "spectator.E007" in ids()


@override_settings(SPECTATOR_ALLOWED_SERVER_HOSTS=["10.0.0.0/8", ".example.org", "http://x:1/"])
def test_it_flags_a_bad_server_host_allowlist_entry() -> None:
    problems = [p for p in check_settings() if p.id == "spectator.E008"]
    assert len(problems) == 1 and "http://x:1/" in problems[0].msg


@override_settings(**{**PUBLIC, "DEBUG": True})
def test_it_warns_of_debug_on_a_public_site() -> None:
    assert "spectator.W003" in ids()


@override_settings(**PUBLIC, SPECTATOR_HTTPS=False)
def test_it_warns_of_a_public_site_without_https() -> None:
    assert "spectator.W004" in ids()
