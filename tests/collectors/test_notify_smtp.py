"""End to end on loopback: an opened alert's e-mail crosses a real SMTP session to aiosmtpd."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from collectors.models import Notification
from collectors.tasks import send_notification_task
from tests.collectors.notify_helpers import opened_alert
from tests.collectors.smtp_inbox import Inbox, smtp_inbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    with smtp_inbox() as inbox:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", inbox.port, False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        settings.DEFAULT_FROM_EMAIL = "spectator@example.org"
        yield inbox


def test_it_delivers_the_alert_opened_mail_over_smtp(
    smtp: Inbox, make_server: Any, alice: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # The committed alert enqueues the task; here the message is run by the task body itself.
    monkeypatch.setattr(send_notification_task, "delay", lambda pk: send_notification_task.run(pk))
    with django_capture_on_commit_callbacks(execute=True):
        alert, [note] = opened_alert(make_server(name="gpu-7"), users=[alice])

    [msg] = smtp.parsed()
    assert msg["To"] == "alice@example.org" and msg["From"] == "spectator@example.org"
    subject = str(msg["Subject"]).strip()  # a non-ASCII subject travels as encoded words
    assert subject.startswith("[Spectator] ") and "gpu-7" in subject and "-30.0%" in subject
    text = msg.get_body(("plain",)).get_content()
    assert "100.0000 ± 1.5000" in text and "70.0000 ± 2.0000" in text
    assert msg.get_body(("html",)) is not None
    note.refresh_from_db()
    assert note.state == Notification.State.SENT and note.attempts_log.get().ok
