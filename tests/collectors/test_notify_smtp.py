"""End to end on loopback: an opened alert's e-mail crosses a real SMTP session to aiosmtpd."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from email import message_from_bytes, policy
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message

from collectors.models import Notification
from collectors.tasks import send_notification_task
from tests.collectors.notify_helpers import opened_alert

pytestmark = pytest.mark.django_db


class Inbox(Message):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Any] = []

    def handle_message(self, message: Any) -> None:
        self.messages.append(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", controller.port, False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.DEFAULT_FROM_EMAIL = "spectator@example.org"
    try:
        yield inbox
    finally:
        controller.stop()


def test_it_delivers_the_alert_opened_mail_over_smtp(
    smtp: Inbox, make_server: Any, alice: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # The committed alert enqueues the task; here the message is run by the task body itself.
    monkeypatch.setattr(send_notification_task, "delay", lambda pk: send_notification_task.run(pk))
    with django_capture_on_commit_callbacks(execute=True):
        alert, [note] = opened_alert(make_server(name="gpu-7"), users=[alice])

    [raw] = smtp.messages
    msg = message_from_bytes(raw.as_bytes(), policy=policy.default)
    assert msg["To"] == "alice@example.org" and msg["From"] == "spectator@example.org"
    subject = str(msg["Subject"]).strip()  # a non-ASCII subject travels as encoded words
    assert subject.startswith("[Spectator] ") and "gpu-7" in subject and "-30.0%" in subject
    text = msg.get_body(("plain",)).get_content()
    assert "100.0000 ± 1.5000" in text and "70.0000 ± 2.0000" in text
    assert msg.get_body(("html",)) is not None
    note.refresh_from_db()
    assert note.state == Notification.State.SENT and note.attempts_log.get().ok
