"""'Speculation not paying' from the per-server non-speculative decode rate the user set."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.alerts import after_probe_run
from collectors.models import Alert, Notification, Subscription
from dashboard.forms import ServerForm
from tests.collectors.detection_helpers import Enqueued, stored_run

pytestmark = pytest.mark.django_db


def test_decoding_below_the_plain_rate_twice_opens_one_alert_and_recovering_resolves_it(
    make_server: Any, alice: Any
) -> None:
    server = make_server(nonspec_decode_tps=120.0)
    Subscription.objects.create(server=server, user=alice)
    enqueued = Enqueued()
    for tps in (150.0, 151.0, 149.0):
        assert after_probe_run(stored_run(server, tps), enqueue=enqueued).opened == []
    assert after_probe_run(stored_run(server, 110.0), enqueue=enqueued).opened == []  # once is not enough
    runs = [stored_run(server, 100.0)]
    [alert] = after_probe_run(runs[0], enqueue=enqueued).opened
    assert alert.kind == Alert.Kind.SPECULATION_NOT_PAYING
    assert (alert.quantity, alert.context) == ("decode_tps", 64)
    assert (alert.old_level, alert.new_level) == (120.0, pytest.approx(105.0))
    assert "non-speculative rate 120" in alert.note
    assert Notification.objects.filter(event__alert=alert).count() == 1  # mailed like any opening

    ev = after_probe_run(stored_run(server, 130.0), enqueue=enqueued)
    assert ev.resolved == [alert]


def test_without_a_plain_rate_nothing_is_checked(make_server: Any) -> None:
    server = make_server()
    for tps in (10.0, 10.1, 9.9):
        after_probe_run(stored_run(server, tps), enqueue=Enqueued())
    assert not Alert.objects.exists()


def test_the_server_form_takes_the_plain_rate_and_rejects_nonsense() -> None:
    data = {"name": "gpu-1", "base_url": "http://10.0.0.5:30000", "kind": "auto", "probe_plan": "{}",
            "probe_interval_s": 3600, "scrape_interval_s": 30, "enabled": "on"}
    form = ServerForm(data={**data, "nonspec_decode_tps": "95.5"})
    assert form.is_valid(), form.errors
    assert form.save().nonspec_decode_tps == 95.5
    form = ServerForm(data={**data, "name": "gpu-2", "nonspec_decode_tps": "-3"})
    assert not form.is_valid() and "nonspec_decode_tps" in form.errors
