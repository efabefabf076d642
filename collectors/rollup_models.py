"""Hourly rollups of the scrape windows (collectors/rollups.py): what long-range charts read.

A 30-day view of 15-second scrapes is 172 800 rows per server; aggregating them per page view took ~0.9 s
on Postgres here. One row per server and hour keeps sums and counts (not means), so any coarser bucket is
an exact re-aggregation: mean = Σ sums / Σ counts.
"""

from __future__ import annotations

from django.db import models


class ScrapeRollup(models.Model):
    server = models.ForeignKey("collectors.Server", on_delete=models.CASCADE, related_name="scrape_rollups")
    hour = models.DateTimeField()  # start of the hour (UTC)
    n = models.PositiveIntegerField()  # good scrapes in the hour
    tau_sum = models.FloatField(default=0.0)
    tau_n = models.PositiveIntegerField(default=0)
    rate_sum = models.FloatField(default=0.0)
    rate_n = models.PositiveIntegerField(default=0)
    running_sum = models.FloatField(default=0.0)
    running_n = models.PositiveIntegerField(default=0)
    waiting_sum = models.FloatField(default=0.0)
    waiting_n = models.PositiveIntegerField(default=0)
    kv_sum = models.FloatField(default=0.0)
    kv_n = models.PositiveIntegerField(default=0)
    generation_tokens = models.FloatField(null=True, blank=True)
    window_s = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "hour"], name="one_rollup_per_server_hour")]

    def __str__(self) -> str:
        return f"rollup of {self.server_id} at {self.hour:%Y-%m-%d %H:00}"
