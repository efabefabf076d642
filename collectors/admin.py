"""Django admin for every collectors model; the API key is a write-only password field (never rendered)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from collectors.models import (
    Alert,
    AlertEvent,
    ChangePoint,
    Notification,
    NotificationAttempt,
    ProbeMeasurement,
    ProbeRun,
    RawSample,
    Scrape,
    ScrapeRollup,
    Server,
    ServerLease,
    Subscription,
)


class ServerForm(forms.ModelForm):
    # Write-only: the stored key is never sent back to the browser (issue 8); blank keeps it.
    api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                              help_text="Sent as a bearer token. Leave blank to keep the current key.")

    class Meta:
        model = Server
        fields = "__all__"

    def clean_api_key(self) -> str:
        return self.cleaned_data.get("api_key") or (self.instance.api_key if self.instance.pk else "")


@admin.register(Server)
class ServerAdmin(admin.ModelAdmin):
    form = ServerForm
    list_display = ("name", "base_url", "kind", "enabled", "probe_interval_s", "scrape_interval_s", "next_probe_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "base_url")


class MeasurementInline(admin.TabularInline):
    model = ProbeMeasurement
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ProbeRun)
class ProbeRunAdmin(admin.ModelAdmin):
    list_display = ("id", "server", "trigger", "status", "queued_at", "started_at", "finished_at",
                    "contaminated", "tau_counters", "current_step")
    list_filter = ("status", "trigger", "contaminated", "server")
    inlines = [MeasurementInline]


@admin.register(ProbeMeasurement)
class ProbeMeasurementAdmin(admin.ModelAdmin):
    list_display = ("run", "kind", "context", "output_len", "repeat", "decode_tps", "ttft_s", "tau_response")
    list_filter = ("kind",)


@admin.register(Scrape)
class ScrapeAdmin(admin.ModelAdmin):
    list_display = ("server", "at", "ok", "tau", "acceptance_rate", "generation_tokens", "running", "waiting", "reset")
    list_filter = ("ok", "reset", "server")
    date_hierarchy = "at"


@admin.register(RawSample)
class RawSampleAdmin(admin.ModelAdmin):
    list_display = ("scrape", "name", "labels", "value")
    search_fields = ("name",)


@admin.register(ServerLease)
class ServerLeaseAdmin(admin.ModelAdmin):
    list_display = ("server", "owner", "expires_at")


@admin.register(ChangePoint)
class ChangePointAdmin(admin.ModelAdmin):
    list_display = ("server", "quantity", "context", "output_len", "at", "direction", "rel_change", "p_value")
    list_filter = ("direction", "quantity", "server")


class AlertEventInline(admin.TabularInline):
    model = AlertEvent
    extra = 0
    can_delete = False
    readonly_fields = ("from_state", "to_state", "at", "by", "note")

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


def _transition_action(to_state: str, label: str) -> Any:
    # State changes go through collectors.alerts.transition, so each one leaves an AlertEvent row.
    @admin.action(description=label)
    def action(modeladmin: admin.ModelAdmin, request: Any, queryset: Any) -> None:
        from collectors.alerts import transition

        changed = sum(transition(alert, to_state, by=request.user, note="from the admin") for alert in queryset)
        modeladmin.message_user(request, f"{changed} alert(s) changed")

    action.__name__ = f"mark_{to_state}"
    return action


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("id", "server", "kind", "quantity", "context", "output_len", "state", "opened_at", "rel_change")
    list_filter = ("state", "kind", "server")
    # The state is read-only here: edits would bypass the event rows; use the actions.
    readonly_fields = ("state", "opened_at", "updated_at", "resolved_at")
    inlines = [AlertEventInline]
    actions = [
        _transition_action(Alert.State.ACKNOWLEDGED, "Acknowledge"),
        _transition_action(Alert.State.RESOLVED, "Resolve"),
        _transition_action(Alert.State.FALSE_POSITIVE, "Mark as false positive"),
    ]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("server", "user", "email", "added_by", "created_at")
    list_filter = ("server",)


class AttemptInline(admin.TabularInline):
    model = NotificationAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("at", "ok", "transient", "error")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "event", "email", "state", "attempts", "sent_at", "last_error")
    list_filter = ("state",)
    inlines = [AttemptInline]


@admin.register(ScrapeRollup)
class ScrapeRollupAdmin(admin.ModelAdmin):
    list_display = ("server", "hour", "n", "tau_n", "generation_tokens", "window_s")
    list_filter = ("server",)
    date_hierarchy = "hour"
