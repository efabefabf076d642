from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.collectors.live import engine, workers  # noqa: F401
from tests.dashboard.browser import browser  # noqa: F401
from tests.django_fixtures import alice, bob, charlie, make_server  # noqa: F401


@pytest.fixture
def viewer(bob: Any) -> Any:  # noqa: F811  (the persona fixture, extended)
    """bob in the viewer role: reads everything, acts on nothing."""
    from dashboard.roles import VIEWER, grant

    grant(bob, VIEWER)
    return bob


@pytest.fixture
def operator(db: Any) -> Any:
    """dave, an operator: reads, and runs probes now."""
    from django.contrib.auth import get_user_model

    from dashboard.roles import OPERATOR, grant

    dave = get_user_model().objects.create_user("dave", "dave@example.org", "dave-password")
    grant(dave, OPERATOR)
    return dave


@pytest.fixture
def staff(db: Any) -> Any:
    """erin, staff: adds and edits servers (and uses the admin)."""
    from django.contrib.auth import get_user_model

    from dashboard.roles import STAFF, grant

    erin = get_user_model().objects.create_user("erin", "erin@example.org", "erin-password")
    grant(erin, STAFF)
    return erin


@pytest.fixture
def sent_probes(monkeypatch: Any) -> list[tuple[Any, ...]]:
    """Probe tasks the views send, captured instead of reaching a broker."""
    from collectors import tasks

    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.probe, "apply_async", lambda args, **kw: sent.append(tuple(args)))
    return sent


@pytest.fixture
def store_run(db: Any) -> Any:
    """A succeeded probe run with two-point, sweep and stream measurements, `hours_ago` in the past."""
    from django.utils import timezone

    from collectors.models import ProbeMeasurement, ProbeRun

    def store(server: Any, decode: dict[int, float], hours_ago: float = 1.0, **fields: Any) -> ProbeRun:
        finished = timezone.now() - timedelta(hours=hours_ago)
        summary = {
            "decode_by_context": {str(c): {"median": v, "spread": 0.5, "n": 2} for c, v in decode.items()},
            "decode_by_output": {"200": {"median": 101.0, "spread": 0.1, "n": 1},
                                 "600": {"median": 99.0, "spread": 0.1, "n": 1}},
        }
        run = ProbeRun.objects.create(
            server=server, trigger=fields.pop("trigger", ProbeRun.Trigger.SCHEDULED),
            status=ProbeRun.Status.SUCCEEDED, started_at=finished - timedelta(minutes=2), finished_at=finished,
            current_step="done", summary=summary, tau_counters=3.2,
            fingerprint={"kind": "ddtree", "model": {"name": "qwen3-tiny"}, "version": "0.1.0", "hash": "abcdef1234"},
            load_before={"running": 0.0}, load_after={"running": 0.0}, **fields,
        )
        ProbeMeasurement.objects.bulk_create(
            [ProbeMeasurement(run=run, kind="two_point", context=c, n1=64, n2=320, t1=0.21, t2=2.5, decode_tps=v)
             for c, v in decode.items()]
            + [ProbeMeasurement(run=run, kind="stream", context=min(decode), output_len=200, streamed_tps=97.5)]
        )
        return run

    return store


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    """Rate-limit counters of a test start at zero: a key prefix of its own in the (shared, real) cache.
    Otherwise failed logins of earlier tests and runs, all from 127.0.0.1, would add up."""
    import uuid

    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}
