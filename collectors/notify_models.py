"""Who hears about alerts, and one row per e-mail (STYLE 4–5). Imported by collectors/models.py.

A Subscription is per server: either a user (the address follows their account) or a plain address
that staff added. A Notification is one (alert event, recipient) pair; a worker claims it with a
conditional UPDATE (pending → sending) so two workers never send it twice, and every attempt is a
NotificationAttempt row with its error.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Subscription(models.Model):
    server = models.ForeignKey("collectors.Server", on_delete=models.CASCADE, related_name="subscriptions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="alert_subscriptions")
    email = models.EmailField(blank=True)  # a plain address added by staff (user is NULL then)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Exactly one of user / address.
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(email="")) | (Q(user__isnull=True) & ~Q(email="")),
                name="subscription_user_xor_email",
            ),
            models.UniqueConstraint(fields=["server", "user"], condition=Q(user__isnull=False),
                                    name="one_subscription_per_user"),
            models.UniqueConstraint(fields=["server", "email"], condition=~Q(email=""),
                                    name="one_subscription_per_address"),
        ]

    @property
    def address(self) -> str:
        return self.user.email if self.user_id else self.email

    def __str__(self) -> str:
        return f"{self.address} → server {self.server_id}"


class Notification(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"  # to be sent (again)
        SENDING = "sending"  # claimed by one worker
        SENT = "sent"
        FAILED = "failed"  # a permanent error, or retries used up

    # NULL: a test e-mail from the alerts page (still a row, so its outcome is on record).
    event = models.ForeignKey("collectors.AlertEvent", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="notifications")
    email = models.EmailField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # When a worker claimed it (pending → sending): a row `sending` for much longer lost its worker.
    claimed_at = models.DateTimeField(null=True, blank=True)
    # When the task's next retry is due: the sweep leaves a pending row alone until then.
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "email"], name="one_notification_per_event_address")]
        indexes = [models.Index(fields=["state", "created_at"], name="notification_state_time")]  # the sweep

    def __str__(self) -> str:
        return f"notification {self.pk} of event {self.event_id} to {self.email} ({self.state})"


class NotificationAttempt(models.Model):
    """One SMTP send attempt and its outcome (error "" = accepted by the server)."""

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="attempts_log")
    at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField()
    transient = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "pk"]
