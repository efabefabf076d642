"""Monitoring rows: servers, probe runs and their measurements, scrapes and raw samples, leases.

State changes are rows (STYLE 4–5): every probe or scrape attempt leaves one with its outcome.
Indexes follow the chart queries, which always read one server over a time range.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, URLValidator
from django.db import models

from collectors.plans import validate_probe_plan

http_url = URLValidator(schemes=["http", "https"], message="Enter an http:// or https:// URL.")


class Server(models.Model):
    class Kind(models.TextChoices):
        AUTO = "auto", "detect"
        DDTREE = "ddtree", "bundled engine (DDTree)"
        VLLM = "vllm", "vLLM"
        SGLANG = "sglang", "SGLang"
        LLAMACPP = "llamacpp", "llama.cpp"

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(max_length=500, validators=[http_url], help_text="e.g. http://10.0.0.5:30000")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.AUTO)
    # Sent as a bearer token; never in __str__/__repr__, logs or error texts.
    api_key = models.CharField(max_length=500, blank=True)
    probe_plan = models.JSONField(default=dict, blank=True, validators=[validate_probe_plan])
    probe_interval_s = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(60)])
    scrape_interval_s = models.PositiveIntegerField(default=30, validators=[MinValueValidator(5)])
    enabled = models.BooleanField(default=True)
    # The user's own measure of this model without speculation (tok/s at a short context); a speculative
    # decode rate below it means speculation is not paying (collectors/alerts.py). Blank = not checked.
    nonspec_decode_tps = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.001)], verbose_name="non-speculative decode rate",
        help_text="tok/s of the same model without speculation; an alert fires when decoding falls below it",
    )
    # NULL = due now (a new server is probed and scraped at the next tick).
    next_probe_at = models.DateTimeField(null=True, blank=True, db_index=True)
    next_scrape_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Server {self.pk} {self.name!r} {self.base_url}>"

    def clean(self) -> None:
        # Issue 8: the host allowlist (collectors/hosts.py); probes and scrapes check it again per request.
        from collectors.hosts import url_refusal

        if why := url_refusal(self.base_url):
            raise ValidationError({"base_url": f"Not allowed: {why}."})


class ProbeRun(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULED = "scheduled"
        MANUAL = "manual"
        CONFIRMATION = "confirmation"  # a re-probe after the fast check suspected a drop (collectors/alerts.py)

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="probe_runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    current_step = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    plan = models.JSONField(default=dict, blank=True)
    fingerprint = models.JSONField(null=True, blank=True)
    load_before = models.JSONField(null=True, blank=True)
    load_after = models.JSONField(null=True, blank=True)
    contaminated = models.BooleanField(default=False)
    contamination_reason = models.CharField(max_length=500, blank=True)
    tau_counters = models.FloatField(null=True, blank=True)
    tau_responses = models.FloatField(null=True, blank=True)
    acceptance = models.JSONField(null=True, blank=True)
    flags = models.JSONField(default=list, blank=True)  # transport_artefact, tau_disagreement, …
    summary = models.JSONField(null=True, blank=True)  # medians and spreads by context / output length
    # The suspect run this confirmation run re-checks; one-to-one, so a suspect gets one confirmation at most.
    confirms = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="confirmation"
    )
    # The earlier attempt this run retries: a transient failure, or a run whose worker died (collectors/FAULTS.md).
    retry_of = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retried_by"
    )
    # Detection after a succeeded run never fails the run; what went wrong is kept here.
    detection_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-queued_at"]
        indexes = [
            models.Index(fields=["server", "-queued_at"], name="probe_run_server_time"),
            models.Index(fields=["server", "status"], name="probe_run_server_status"),
            # The charts' "succeeded runs of a server, newest first" (dashboard/queries.py).
            models.Index(fields=["server", "status", "-finished_at"], name="probe_run_server_finished"),
            # The fleet's trend lines: every server's runs in a window (index-only on Postgres).
            models.Index(fields=["status", "finished_at"], include=["server", "id"], name="probe_run_finished_cover"),
        ]

    def __str__(self) -> str:
        return f"probe #{self.pk} of {self.server_id} ({self.status})"


class ProbeMeasurement(models.Model):
    run = models.ForeignKey(ProbeRun, on_delete=models.CASCADE, related_name="measurements")
    kind = models.CharField(max_length=32)  # two_point | output_sweep | stream, as engine_client names them
    context = models.PositiveIntegerField()
    output_len = models.PositiveIntegerField(null=True, blank=True)
    repeat = models.PositiveSmallIntegerField(default=0)
    n1 = models.PositiveIntegerField(null=True, blank=True)
    n2 = models.PositiveIntegerField(null=True, blank=True)
    t1 = models.FloatField(null=True, blank=True)
    t2 = models.FloatField(null=True, blank=True)
    decode_tps = models.FloatField(null=True, blank=True)
    ttft_s = models.FloatField(null=True, blank=True)
    e2e_s = models.FloatField(null=True, blank=True)
    streamed_tps = models.FloatField(null=True, blank=True)
    chunk_gap_mean_s = models.FloatField(null=True, blank=True)
    chunk_gap_p95_s = models.FloatField(null=True, blank=True)
    tokens_per_chunk = models.FloatField(null=True, blank=True)
    tau_response = models.FloatField(null=True, blank=True)
    server_decode_s = models.FloatField(null=True, blank=True)
    server_decode_tps = models.FloatField(null=True, blank=True)  # (N2 − N1) / server-side decode time
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)  # as the server counted them
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)  # prefix-cache hits (should be 0)

    class Meta:
        indexes = [models.Index(fields=["run", "kind", "context"], name="measurement_run_kind_ctx")]


class Scrape(models.Model):
    """One GET /metrics and the normalised values over the window since the previous good scrape."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="scrapes")
    at = models.DateTimeField()
    ok = models.BooleanField(default=True)
    error = models.TextField(blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    kind = models.CharField(max_length=16, blank=True)
    # Cumulative counters as read; the next scrape's window is computed against these.
    totals = models.JSONField(null=True, blank=True)
    window_s = models.FloatField(null=True, blank=True)
    reset = models.BooleanField(default=False)
    steps = models.FloatField(null=True, blank=True)
    drafted = models.FloatField(null=True, blank=True)
    accepted = models.FloatField(null=True, blank=True)
    tau = models.FloatField(null=True, blank=True)
    acceptance_rate = models.FloatField(null=True, blank=True)
    generation_tokens = models.FloatField(null=True, blank=True)
    prompt_tokens = models.FloatField(null=True, blank=True)
    requests = models.FloatField(null=True, blank=True)
    running = models.FloatField(null=True, blank=True)
    waiting = models.FloatField(null=True, blank=True)
    kv_usage = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [
            models.Index(fields=["server", "-at"], name="scrape_server_time"),
            models.Index(fields=["at"], name="scrape_time"),  # retention
        ]


class RawSample(models.Model):
    """Every exposition sample of a scrape, bulk-inserted; kept SPECTATOR_RAW_SAMPLE_RETENTION_DAYS."""

    scrape = models.ForeignKey(Scrape, on_delete=models.CASCADE, related_name="samples")
    name = models.CharField(max_length=200)
    labels = models.JSONField(default=dict)
    value = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["scrape", "name"], name="raw_sample_scrape_name")]


class ServerLease(models.Model):
    """The database lock backend: one row per server; holder + expiry (see collectors/locks.py)."""

    server = models.OneToOneField(Server, on_delete=models.CASCADE, primary_key=True, related_name="lease")
    owner = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)


# Change points and alerts live in their own module (STYLE 10); imported here so Django registers them.
from collectors.alert_models import Alert, AlertEvent, ChangePoint  # noqa: E402, F401
from collectors.notify_models import Notification, NotificationAttempt, Subscription  # noqa: E402, F401
from collectors.rollup_models import ScrapeRollup  # noqa: E402, F401
