from __future__ import annotations

from django.test import override_settings

from dashboard.checks import check_settings


def ids() -> set[str]:
    return {problem.id for problem in check_settings()}


def test_it_accepts_the_running_configuration() -> None:
    assert not {i for i in ids() if i.startswith("spectator.E")}


@override_settings(CELERY_BROKER_URL="amqp://guest@localhost//")
def test_it_flags_an_unsupported_broker() -> None:
    assert "spectator.E002" in ids()


@override_settings(SPECTATOR_LOCK_BACKEND="zookeeper")
def test_it_flags_an_unknown_lock_backend() -> None:
    assert "spectator.E003" in ids()


@override_settings(SPECTATOR_LOCK_BACKEND="redis", CELERY_BROKER_URL="filesystem://")
def test_it_flags_a_redis_lock_without_redis() -> None:
    assert "spectator.E004" in ids()


@override_settings(DEBUG=False, SECRET_KEY="spectator-insecure-local-only", ALLOWED_HOSTS=["spectator.example.org"])
def test_it_flags_the_default_secret_key_on_a_public_host() -> None:
    assert "spectator.E001" in ids()


@override_settings(SPECTATOR_PROBE_TIME_LIMIT=5, SPECTATOR_TICK_SECONDS=10)
def test_it_flags_a_probe_limit_shorter_than_a_tick() -> None:
    assert "spectator.E005" in ids()


@override_settings(EMAIL_HOST="smtp.example.org", DEFAULT_FROM_EMAIL="spectator@localhost")
def test_it_warns_of_a_local_sender_on_a_real_smtp_server() -> None:
    assert "spectator.W002" in ids()
