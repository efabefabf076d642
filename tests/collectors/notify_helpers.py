"""An opened regression alert on a subscribed server, with its pending Notification rows."""

from __future__ import annotations

from typing import Any

from collectors.alerts import open_alert
from collectors.detection.series import DECODE_TPS, SeriesKey
from collectors.models import Alert, Notification, ProbeRun, Subscription


def opened_alert(
    server: Any, users: tuple[Any, ...] | list[Any] = (), emails: tuple[str, ...] | list[str] = ()
) -> tuple[Alert, list[Notification]]:
    for user in users:
        Subscription.objects.create(server=server, user=user)
    for email in emails:
        Subscription.objects.create(server=server, email=email)
    runs = [ProbeRun.objects.create(server=server, trigger=trigger, status="succeeded")
            for trigger in ("scheduled", "confirmation")]
    alert = open_alert(
        server, Alert.Kind.THROUGHPUT_REGRESSION, SeriesKey(DECODE_TPS, 64), old_level=100.0, old_spread=1.5,
        new_level=70.0, new_spread=2.0, rel_change=-0.3, confirming_runs=runs,
        fingerprint_before={"version": "0.1.0"}, fingerprint_after={"version": "0.2.0"},
        note="decode_tps ctx 64: 100 → 70 (-30.0%), confirmed by a re-probe",
    )
    assert alert is not None
    return alert, list(Notification.objects.filter(event__alert=alert).order_by("email"))
