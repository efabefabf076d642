"""Alert e-mails: who gets one, and sending each exactly once (STYLE 4–7).

1. When alerts.py records an "opened" or "resolved" AlertEvent, `create_notifications` adds one
   Notification row per subscriber address in the same transaction; on commit a Celery task per row
   is enqueued (collectors/tasks.py `send_notification`).
2. `send_notification` claims the row with a conditional UPDATE (pending → sending); only the worker
   whose UPDATE changed exactly one row goes on, so a redelivered task or a second worker never sends
   the same mail twice.
3. The attempt is stored (NotificationAttempt) with its error. Accepted → sent. A transient SMTP
   failure (connection, timeout, 4xx reply) puts the row back to pending and raises TransientSendError
   for the task to retry with backoff; anything else is permanent → failed.
4. `sweep_stuck` (a beat task) re-queues rows whose task was lost: `pending` past its retry time (the
   enqueue failed, or the broker lost the message) and `sending` long after its claim (the worker died
   mid-send). A stuck `sending` row goes back to pending by a conditional UPDATE on the claim time it
   was read with, so two sweeps cannot both revive it, and the send still needs the pending → sending
   claim. A worker that died after the SMTP server accepted but before the row said `sent` leaves the
   one case where a mail can go out twice; the time limit puts that window at one SMTP session.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from collectors import emails, telemetry
from collectors.models import Alert, AlertEvent, Notification, NotificationAttempt, Subscription

log = logging.getLogger(__name__)

# Which event kinds mail subscribers, and with which e-mail function.
MAILED = {Alert.State.OPEN: emails.alert_opened, Alert.State.RESOLVED: emails.alert_resolved}


class TransientSendError(Exception):
    """The SMTP server may accept the mail later: the task retries."""


def subscriber_addresses(server_id: int) -> list[str]:
    subs = Subscription.objects.filter(server_id=server_id).select_related("user")
    # A user without an address (or deactivated) cannot be mailed; set() drops a user also added by address.
    addresses = {s.address.strip().lower() for s in subs if s.address and (s.user is None or s.user.is_active)}
    return sorted(addresses)


def create_notifications(event: AlertEvent) -> list[int]:
    """One pending Notification per subscriber for a mailed event; their ids (call inside the event's transaction)."""
    if event.to_state not in MAILED or (event.to_state == Alert.State.OPEN and event.from_state):
        return []
    server_id = Alert.objects.filter(pk=event.alert_id).values_list("server_id", flat=True).get()
    rows = [Notification(event=event, email=address) for address in subscriber_addresses(server_id)]
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    return list(Notification.objects.filter(event=event).values_list("pk", flat=True))


def notify_on_commit(event: AlertEvent) -> None:
    """Create the rows now and enqueue their sends once the event is committed (a worker must see it)."""
    ids = create_notifications(event)
    if ids:
        transaction.on_commit(lambda: _enqueue(ids))


def _enqueue(ids: list[int]) -> None:
    from collectors.tasks import send_notification_task

    for pk in ids:
        try:
            send_notification_task.delay(pk)
        except Exception:  # a broker hiccup must not fail detection; the row stays pending for a later send
            log.exception("could not enqueue notification %s", pk)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, smtplib.SMTPResponseException):
        return 400 <= exc.smtp_code < 500  # 4xx: try again later; 5xx: the server refuses for good
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in exc.recipients.values())
    # Dropped connection, refused connection, timeout, DNS: the server may be back later.
    return isinstance(exc, smtplib.SMTPServerDisconnected | smtplib.SMTPConnectError | OSError)


def alert_context(event: AlertEvent) -> dict[str, Any]:
    alert = event.alert
    runs = list(alert.confirming_runs.order_by("queued_at", "pk"))
    for run in runs:
        run.path = reverse("dashboard-run", args=[run.pk])
    return {
        "event": event, "alert": alert, "server": alert.server, "runs": runs,
        "rel_change_pct": f"{alert.rel_change:+.1%}" if alert.rel_change is not None else "",
        "server_path": reverse("dashboard-server", args=[alert.server_id]),
        "alert_path": reverse("dashboard-alerts") + f"#alert-{alert.pk}",
    }


def _build(notification: Notification) -> Any:
    if notification.event_id is None:
        return emails.test_email(notification.email, {"to": notification.email, "now": timezone.now()})
    event = AlertEvent.objects.select_related("alert__server").get(pk=notification.event_id)
    return MAILED[event.to_state](notification.email, alert_context(event))


def _record(notification_id: int, state: str, *, error: str = "", transient: bool = False) -> None:
    now = timezone.now()
    with transaction.atomic():
        NotificationAttempt.objects.create(notification_id=notification_id, ok=not error, transient=transient,
                                           error=error)
        Notification.objects.filter(pk=notification_id).update(
            state=state, last_error=error, sent_at=now if state == Notification.State.SENT else None)


def send_notification(notification_id: int) -> bool:
    """Send one notification if this caller wins the claim; True when it was sent now.

    Raises TransientSendError after storing a transient failure (the row is pending again).
    """
    claimed = Notification.objects.filter(pk=notification_id, state=Notification.State.PENDING).update(
        state=Notification.State.SENDING, attempts=F("attempts") + 1, claimed_at=timezone.now(), next_attempt_at=None)
    if claimed != 1:
        return False  # sent, failed, or another worker holds it
    notification = Notification.objects.get(pk=notification_id)
    try:
        _build(notification).send(fail_silently=False)
    except Exception as exc:
        transient = _is_transient(exc)
        error = f"{type(exc).__name__}: {exc}"[:2000]
        _record(notification_id, Notification.State.PENDING if transient else Notification.State.FAILED,
                error=error, transient=transient)
        telemetry.email_attempt("deferred" if transient else "failed")
        log.warning("notification %s to %s: %s", notification_id, notification.email, error)
        if transient:
            raise TransientSendError(error) from exc
        return False
    _record(notification_id, Notification.State.SENT)
    telemetry.email_attempt("sent")
    return True


def retry_at(notification_id: int, countdown_s: float) -> None:
    """The task will try again in `countdown_s`: the sweep must not revive the row before then."""
    Notification.objects.filter(pk=notification_id, state=Notification.State.PENDING).update(
        next_attempt_at=timezone.now() + timedelta(seconds=countdown_s))


def sweep_stuck(*, stuck_s: float, max_attempts: int, now: Any = None) -> list[int]:
    """Re-queue notifications whose task was lost (step 4 of the module docstring); their ids.

    `stuck_s` must exceed the send task's hard time limit, so a row still being sent is never taken.
    A row that used up `max_attempts` is failed instead of being tried again.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=stuck_s)
    for pk, claimed_at in Notification.objects.filter(state=Notification.State.SENDING,
                                                      claimed_at__lt=cutoff).values_list("pk", "claimed_at")[:500]:
        revived = Notification.objects.filter(pk=pk, state=Notification.State.SENDING, claimed_at=claimed_at).update(
            state=Notification.State.PENDING, last_error="the worker stopped while sending; re-queued",
            next_attempt_at=None)
        if revived:
            log.warning("notification %s was stuck sending since %s; re-queued", pk, claimed_at)
    pending = Notification.objects.filter(state=Notification.State.PENDING, created_at__lt=cutoff).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lt=cutoff))
    Notification.objects.filter(pk__in=pending.filter(attempts__gte=max_attempts).values("pk")).update(
        state=Notification.State.FAILED)
    ids = list(pending.filter(attempts__lt=max_attempts).values_list("pk", flat=True)[:500])
    # Marked as due later first, so the next sweep does not enqueue them again before this send ran.
    Notification.objects.filter(pk__in=ids, state=Notification.State.PENDING).update(next_attempt_at=now)
    _enqueue(ids)
    return ids


def give_up(notification_id: int) -> None:
    """Retries used up: a pending row becomes failed (its attempts keep the errors)."""
    if Notification.objects.filter(pk=notification_id, state=Notification.State.PENDING).update(
            state=Notification.State.FAILED):
        telemetry.email_attempt("failed")


def send_test_email(address: str) -> Notification:
    """A test e-mail to `address`, sent now (not queued: the page shows the outcome at once)."""
    notification = Notification.objects.create(event=None, email=address)
    try:
        send_notification(notification.pk)
    except TransientSendError:
        give_up(notification.pk)  # the user sees the error and can press the button again
    notification.refresh_from_db()
    return notification
