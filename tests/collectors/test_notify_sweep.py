"""The beat's sweep for notifications whose send task was lost: re-queued once, never sent twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from collectors.models import Notification
from collectors.notify import send_notification, sweep_stuck
from collectors.tasks import send_notification_task
from tests.collectors.notify_helpers import opened_alert

pytestmark = pytest.mark.django_db

STUCK_S = 300


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The send tasks the sweep enqueues (ids), instead of publishing them."""
    ids: list[int] = []
    monkeypatch.setattr(send_notification_task, "delay", ids.append)
    return ids


def age(note: Notification, seconds: float, **fields: Any) -> None:
    then = timezone.now() - timedelta(seconds=seconds)
    Notification.objects.filter(pk=note.pk).update(created_at=then, **fields)


def test_a_send_whose_worker_died_is_requeued_and_sent_once(make_server: Any, alice: Any, queued: list) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    # A worker claimed it ten minutes ago and was killed mid-send.
    age(note, 900, state="sending", attempts=1, claimed_at=timezone.now() - timedelta(seconds=600))

    assert sweep_stuck(stuck_s=STUCK_S, max_attempts=7) == [note.pk]
    assert queued == [note.pk]
    note.refresh_from_db()
    assert note.state == "pending" and "re-queued" in note.last_error
    assert sweep_stuck(stuck_s=STUCK_S, max_attempts=7) == []  # a second sweep does not queue it again

    assert send_notification(note.pk) is True
    assert send_notification(note.pk) is False  # the lost task redelivered after all: the claim stops it
    assert len(mail.outbox) == 1
    note.refresh_from_db()
    assert note.state == "sent" and note.attempts == 2


def test_a_pending_row_whose_enqueue_failed_is_queued(make_server: Any, alice: Any, queued: list) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    age(note, 900)
    assert sweep_stuck(stuck_s=STUCK_S, max_attempts=7) == [note.pk] and queued == [note.pk]


def test_it_leaves_rows_that_are_still_in_hand_alone(make_server: Any, alice: Any, bob: Any, charlie: Any,
                                                   queued: list) -> None:
    _, notes = opened_alert(make_server(), users=[alice, bob, charlie])
    waiting, sending, fresh = notes
    age(waiting, 900, next_attempt_at=timezone.now() + timedelta(seconds=600))  # a task retry is due later
    age(sending, 900, state="sending", claimed_at=timezone.now() - timedelta(seconds=30))  # being sent now
    # `fresh` was created a moment ago: its task is on its way.
    assert sweep_stuck(stuck_s=STUCK_S, max_attempts=7) == [] and queued == []
    assert Notification.objects.get(pk=sending.pk).state == "sending"


def test_a_row_out_of_attempts_fails_instead(make_server: Any, alice: Any, queued: list) -> None:
    _, [note] = opened_alert(make_server(), users=[alice])
    age(note, 900, attempts=7)
    assert sweep_stuck(stuck_s=STUCK_S, max_attempts=7) == [] and queued == []
    assert Notification.objects.get(pk=note.pk).state == "failed"


def test_the_beat_runs_the_sweep(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["sweep-notifications"]
    assert entry["task"] == send_notification_task.name.replace("send_notification", "sweep_notifications")
    assert entry["schedule"] == settings.SPECTATOR_NOTIFY_SWEEP_SECONDS
