"""Alert e-mails through Django's locmem backend: content, exactly-once claim, failures on record."""

from __future__ import annotations

import smtplib
from typing import Any

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend

from collectors import notify
from collectors.alerts import transition
from collectors.models import Alert, Notification
from collectors.notify import TransientSendError, send_notification
from tests.collectors.notify_helpers import opened_alert

pytestmark = pytest.mark.django_db


class DisconnectingBackend(BaseEmailBackend):
    def send_messages(self, messages: Any) -> int:
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, messages: Any) -> int:
        raise smtplib.SMTPDataError(554, b"5.7.1 rejected as spam")


@pytest.fixture(autouse=True)
def site(settings: Any) -> None:
    settings.SPECTATOR_SITE_URL = "https://spectator.example.org"


def test_it_creates_one_notification_per_subscriber_address(make_server: Any, alice: Any, bob: Any) -> None:
    _, notes = opened_alert(make_server(), users=[alice, bob], emails=["ops@example.org", "ALICE@example.org"])
    assert [n.email for n in notes] == ["alice@example.org", "bob@example.org", "ops@example.org"]
    assert {n.state for n in notes} == {"pending"}


def test_it_enqueues_the_sends_only_after_commit(
    make_server: Any, alice: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from collectors import tasks

    sent: list[int] = []
    monkeypatch.setattr(tasks.send_notification_task, "delay", sent.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _, notes = opened_alert(make_server(), users=[alice])
    assert sent == []
    for callback in callbacks:
        callback()
    assert sent == [notes[0].pk]


def test_it_states_the_series_levels_runs_fingerprint_and_links(make_server: Any, alice: Any) -> None:
    server = make_server(name="gpu-7")
    alert, [note] = opened_alert(server, users=[alice])
    assert send_notification(note.pk) is True
    [msg] = mail.outbox
    assert msg.to == ["alice@example.org"]
    assert msg.subject == f"[Spectator] {alert.get_kind_display()} on gpu-7: decode_tps · ctx 64 (-30.0%)"
    html = msg.alternatives[0][0]
    for body in (msg.body, html):
        assert "100.0000 ± 1.5000" in body and "70.0000 ± 2.0000" in body and "-30.0%" in body
        assert f"https://spectator.example.org/servers/{server.pk}/" in body
        assert f"https://spectator.example.org/alerts/#alert-{alert.pk}" in body
        for run in alert.confirming_runs.all():
            assert f"https://spectator.example.org/runs/{run.pk}/" in body
        assert "0.1.0" in body and "0.2.0" in body
    assert "&#x27;" not in msg.body  # the text part is not HTML-escaped


def test_it_mails_the_resolve(make_server: Any, alice: Any) -> None:
    alert, [opened] = opened_alert(make_server(name="gpu-7"), users=[alice])
    assert transition(alert, Alert.State.RESOLVED, note="decode_tps ctx 64 back at 99.5")
    resolved = Notification.objects.exclude(pk=opened.pk).get()
    assert send_notification(resolved.pk)
    assert mail.outbox[0].subject.startswith("[Spectator] Resolved: ")
    assert "back at 99.5" in mail.outbox[0].body


def test_it_does_not_mail_an_acknowledgement(make_server: Any, alice: Any) -> None:
    alert, _ = opened_alert(make_server(), users=[alice])
    assert transition(alert, Alert.State.ACKNOWLEDGED, by=alice)
    assert Notification.objects.count() == 1


def test_it_never_sends_one_notification_twice(make_server: Any, alice: Any) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    assert send_notification(note.pk) is True
    assert send_notification(note.pk) is False  # a redelivered task
    assert len(mail.outbox) == 1
    note.refresh_from_db()
    assert (note.state, note.attempts, note.attempts_log.count()) == ("sent", 1, 1)


def test_it_lets_only_the_claiming_worker_send(make_server: Any, alice: Any, monkeypatch: Any) -> None:
    """A second worker arriving while the first is mid-send finds the row claimed and backs off."""
    _, [note] = opened_alert(make_server(), users=[alice])
    second: list[bool] = []
    build = notify._build

    def build_then_race(notification: Notification) -> Any:
        second.append(send_notification(notification.pk))
        return build(notification)

    monkeypatch.setattr(notify, "_build", build_then_race)
    assert send_notification(note.pk) is True
    assert second == [False] and len(mail.outbox) == 1


def test_it_stores_a_transient_failure_and_sends_on_the_retry(make_server: Any, alice: Any, settings: Any) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    settings.EMAIL_BACKEND = f"{__name__}.DisconnectingBackend"
    with pytest.raises(TransientSendError):
        send_notification(note.pk)
    note.refresh_from_db()
    assert note.state == "pending" and "SMTPServerDisconnected" in note.last_error
    [attempt] = note.attempts_log.all()
    assert (attempt.ok, attempt.transient) == (False, True) and "unexpectedly closed" in attempt.error

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert send_notification(note.pk) is True
    note.refresh_from_db()
    assert (note.state, note.attempts, note.last_error) == ("sent", 2, "")
    assert [a.ok for a in note.attempts_log.all()] == [False, True]


def test_it_does_not_retry_a_permanent_refusal(make_server: Any, alice: Any, settings: Any) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    settings.EMAIL_BACKEND = f"{__name__}.RefusingBackend"
    assert send_notification(note.pk) is False  # no TransientSendError: nothing to retry
    note.refresh_from_db()
    assert note.state == "failed" and "554" in note.last_error
    assert note.attempts_log.get().transient is False
