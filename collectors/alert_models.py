"""Change points and alerts (DESIGN §6). Imported by collectors/models.py.

A series is (server, quantity, context, output_len) — see collectors/detection/series.py. Alert
state changes are conditional UPDATEs plus an AlertEvent row each (STYLE 4); "one active alert per
series and kind" is a partial unique index, so two workers cannot both open one.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class ChangePoint(models.Model):
    """A level shift the change-point detector found in a series; drawn on the charts."""

    class Direction(models.TextChoices):
        REGRESSION = "regression"
        IMPROVEMENT = "improvement"

    server = models.ForeignKey("collectors.Server", on_delete=models.CASCADE, related_name="change_points")
    quantity = models.CharField(max_length=16)  # decode_tps | tau | ttft
    context = models.PositiveIntegerField(default=0)
    output_len = models.PositiveIntegerField(default=0)  # 0 = not an output-sweep series
    # The first probe run at the new level, and its time (kept if the run is deleted by retention).
    run = models.ForeignKey("collectors.ProbeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField()
    index = models.PositiveIntegerField()  # position in the analysed history (debugging aid only)
    old_level = models.FloatField()
    old_spread = models.FloatField()
    new_level = models.FloatField()
    new_spread = models.FloatField()
    rel_change = models.FloatField()
    p_value = models.FloatField()
    direction = models.CharField(max_length=16, choices=Direction.choices)
    detected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]
        indexes = [
            models.Index(fields=["server", "quantity", "context", "output_len", "-at"], name="change_point_series")
        ]

    def __str__(self) -> str:
        return f"{self.direction} {self.rel_change:+.1%} in {self.quantity} ctx {self.context} of {self.server_id}"


class Alert(models.Model):
    class Kind(models.TextChoices):
        THROUGHPUT_REGRESSION = "throughput_regression"
        ACCEPTANCE_REGRESSION = "acceptance_regression"
        SPECULATION_NOT_PAYING = "speculation_not_paying"
        UNREACHABLE = "unreachable"
        METRICS_STALE = "metrics_stale"
        SCHEMA_CHANGED = "schema_changed"
        TRANSPORT_ARTEFACT = "transport_artefact"

    class State(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"
        FALSE_POSITIVE = "false_positive"

    ACTIVE = (State.OPEN, State.ACKNOWLEDGED)

    server = models.ForeignKey("collectors.Server", on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    # Series key; server-wide kinds (unreachable, …) leave quantity "" and context/output_len 0.
    quantity = models.CharField(max_length=16, blank=True)
    context = models.PositiveIntegerField(default=0)
    output_len = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    old_level = models.FloatField(null=True, blank=True)  # the baseline it dropped from
    old_spread = models.FloatField(null=True, blank=True)
    new_level = models.FloatField(null=True, blank=True)
    new_spread = models.FloatField(null=True, blank=True)
    rel_change = models.FloatField(null=True, blank=True)
    confirming_runs = models.ManyToManyField("collectors.ProbeRun", blank=True, related_name="alerts")
    change_point = models.ForeignKey(ChangePoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    fingerprint_before = models.JSONField(null=True, blank=True)  # set only when the fingerprint changed
    fingerprint_after = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["server", "kind", "quantity", "context", "output_len"],
                condition=Q(state__in=["open", "acknowledged"]),
                name="one_active_alert_per_series_kind",
            )
        ]
        indexes = [
            models.Index(fields=["state", "-opened_at"], name="alert_state_time"),
            models.Index(fields=["server", "-opened_at"], name="alert_server_time"),
        ]

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE

    def series_label(self) -> str:
        parts = [self.quantity] if self.quantity else []
        if self.context:
            parts.append(f"ctx {self.context}")
        if self.output_len:
            parts.append(f"out {self.output_len}")
        return " · ".join(parts)

    def __str__(self) -> str:
        return f"{self.kind} on {self.server_id} {self.series_label()} ({self.state})"


class AlertEvent(models.Model):
    """One row per state change of an alert: from, to, who (NULL = detection), when, why."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=16, blank=True)  # "" for the opening
    to_state = models.CharField(max_length=16, choices=Alert.State.choices)
    at = models.DateTimeField(auto_now_add=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"alert {self.alert_id}: {self.from_state or '-'} → {self.to_state}"
