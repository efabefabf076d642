"""The notification task's retry decision, tested by pushing a request on the task (not eager mode)."""

from __future__ import annotations

import smtplib
from typing import Any

import pytest
from celery.exceptions import Retry
from django.core.mail.backends.base import BaseEmailBackend

from collectors.tasks import NOTIFY_MAX_RETRIES, send_notification_task
from tests.collectors.notify_helpers import opened_alert

pytestmark = pytest.mark.django_db


class TimeoutBackend(BaseEmailBackend):
    def send_messages(self, messages: Any) -> int:
        raise TimeoutError("timed out")


@pytest.fixture(autouse=True)
def failing(settings: Any) -> None:
    settings.EMAIL_BACKEND = f"{__name__}.TimeoutBackend"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    monkeypatch.setattr(send_notification_task, "apply_async",
                        lambda *args, **kwargs: messages.append({"args": args, **kwargs}))
    return messages


@pytest.fixture
def request_with(request: Any) -> Any:
    def push(retries: int) -> None:
        send_notification_task.push_request(retries=retries, called_directly=False)
        request.addfinalizer(send_notification_task.pop_request)

    return push


def test_it_retries_a_timeout_with_backoff(make_server: Any, alice: Any, request_with: Any, sent: list) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    request_with(2)
    with pytest.raises(Retry):
        send_notification_task.run(note.pk)
    note.refresh_from_db()
    assert note.state == "pending" and "TimeoutError" in note.last_error
    assert len(sent) == 1 and sent[0]["countdown"] == 240  # 60 s · 2²


def test_it_gives_up_after_the_last_retry(make_server: Any, alice: Any, request_with: Any, sent: list) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    request_with(NOTIFY_MAX_RETRIES)
    send_notification_task.run(note.pk)  # no Retry raised
    note.refresh_from_db()
    assert note.state == "failed" and note.attempts_log.count() == 1 and sent == []


def test_it_caps_the_backoff() -> None:
    from collectors.tasks import _notify_backoff_s

    assert [_notify_backoff_s(n) for n in (0, 1, 5, 20)] == [60, 120, 1800, 1800]


def test_it_treats_a_5xx_reply_as_permanent_and_a_4xx_as_transient() -> None:
    from collectors.notify import _is_transient

    assert _is_transient(smtplib.SMTPDataError(451, b"try later"))
    assert not _is_transient(smtplib.SMTPDataError(550, b"no such user"))
    assert _is_transient(ConnectionRefusedError())
