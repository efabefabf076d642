"""Scrapes: GET /metrics → raw samples in bulk → normalised values over the window since the last
good scrape of the same server (DESIGN §3 step 2, §5).

The window arithmetic is engine_client's (`metrics.window`): a counter lower than last time means the
server restarted, so the window counts from the restart, is flagged `reset`, and is never negative.
The previous snapshot is rebuilt from the totals stored on the previous good Scrape.
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any

from django.db import transaction
from django.utils import timezone

from collectors import telemetry
from collectors.clients import clean, client_for, describe, is_client_error, is_transient, scrape_bounds
from collectors.models import RawSample, Scrape, Server

WINDOW_FIELDS = (
    "steps", "drafted", "accepted", "generation_tokens", "prompt_tokens", "requests",
    "tau", "acceptance_rate", "running", "waiting", "kv_usage", "reset",
)


def snapshot_from_totals(totals: dict[str, Any]) -> Any:
    """Rebuild the engine_client Snapshot stored (as `Snapshot.to_dict()`) on an earlier Scrape."""
    from engine_client.metrics import Snapshot

    known = {f.name for f in fields(Snapshot)}
    data = {k: v for k, v in totals.items() if k in known}
    data["per_position"] = {int(k): v for k, v in (totals.get("per_position") or {}).items()}
    return Snapshot(**data)


def window_values(previous: dict[str, Any] | None, snapshot: Any) -> dict[str, Any]:
    """Normalised per-window values (DESIGN §5): engine_client's `window` between the stored totals
    of the previous good scrape and this snapshot; with no previous scrape, only the gauges."""
    from engine_client.metrics import window

    if previous is None:
        return {"running": snapshot.running, "waiting": snapshot.waiting, "kv_usage": snapshot.kv_usage}
    w = window(snapshot_from_totals(previous), snapshot)
    values = {name: getattr(w, name) for name in WINDOW_FIELDS}
    values["window_s"] = w.duration_s
    return {k: clean(v) if isinstance(v, float) else v for k, v in values.items()}


def _samples(snapshot: Any) -> list[tuple[str, dict[str, str], float]]:
    return [(s["name"], dict(s.get("labels") or {}), float(s["value"])) for s in snapshot.samples]


def scrape_server(server: Server, *, client: Any = None, raise_unreachable: bool = False) -> Scrape:
    """One scrape of one server; always leaves a Scrape row (ok or with the error).

    `raise_unreachable`: after storing the failed row, re-raise connect errors and timeouts (a probe
    run uses this to fail early with the reason); other errors, such as a server without /metrics,
    only leave the row."""
    from engine_client.metrics import parse_metrics

    at = timezone.now()
    started = time.monotonic()
    own_client = client is None
    client = client or client_for(server, **scrape_bounds())
    try:
        text = client.metrics_text()
        snapshot = parse_metrics(text)
    except Exception as exc:
        if not is_client_error(exc) and not isinstance(exc, ValueError):
            raise
        failed = Scrape.objects.create(
            server=server, at=at, ok=False, error=describe(exc, server.api_key), duration_s=time.monotonic() - started
        )
        telemetry.scrape_finished(failed)
        if raise_unreachable and is_client_error(exc) and is_transient(exc):
            raise
        return failed
    finally:
        if own_client:
            client.close()
    totals = clean(snapshot.to_dict())
    previous = server.scrapes.filter(ok=True, totals__isnull=False).order_by("-at").first()
    values = window_values(previous.totals if previous else None, snapshot)
    with transaction.atomic():
        scrape = Scrape.objects.create(
            server=server,
            at=at,
            ok=True,
            duration_s=time.monotonic() - started,
            kind=snapshot.kind,
            totals=totals,
            **values,
        )
        RawSample.objects.bulk_create(
            [
                RawSample(scrape=scrape, name=name[:200], labels=labels, value=value)
                for name, labels, value in _samples(snapshot)
                if clean(value) is not None  # NaN/inf (e.g. an empty histogram's quantile): no row
            ],
            batch_size=1000,
        )
    telemetry.scrape_finished(scrape)
    return scrape
