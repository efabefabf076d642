"""Django admin for every collectors model; the API key is a write-only password field."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from collectors.models import ProbeMeasurement, ProbeRun, RawSample, Scrape, Server, ServerLease


class ServerForm(forms.ModelForm):
    class Meta:
        model = Server
        fields = "__all__"
        widgets = {"api_key": forms.PasswordInput(render_value=True)}


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
