"""Runs whose worker died (collectors/FAULTS.md): settled by the tick's sweep or by the redelivered
message, once the server's lock is free; never while a live probe holds it; replaced at most once."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from collectors.locks import Lock, remaining_s
from collectors.models import ProbeRun
from collectors.probing import WORKER_LOST, ServerBusy, queue_run, run_probe_for_server
from collectors.scheduling import recover_lost_runs
from tests.engine.server.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def running(server: Any, **fields: Any) -> ProbeRun:
    run = queue_run(server, ProbeRun.Trigger.SCHEDULED)
    ProbeRun.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now(),
                                              current_step="two-point c=64", **fields)
    run.refresh_from_db()
    return run


@pytest.fixture
def enqueued() -> list[tuple[Any, ProbeRun]]:
    return []


def test_the_sweep_fails_a_running_run_behind_a_free_lock_and_enqueues_its_replacement(
        make_server: Any, enqueued: list) -> None:
    server = make_server()
    lost = running(server)
    assert recover_lost_runs(lambda s, r: enqueued.append((s, r))) == 1
    lost.refresh_from_db()
    assert lost.status == "failed" and lost.error == WORKER_LOST
    assert lost.current_step == "failed during: two-point c=64" and lost.finished_at
    [(_, replacement)] = enqueued
    assert replacement.retry_of == lost and replacement.status == "queued" and replacement.trigger == "scheduled"
    # A second sweep finds nothing more to do: one replacement per lost run.
    assert recover_lost_runs(lambda s, r: enqueued.append((s, r))) == 0 and len(enqueued) == 1


@override_settings(SPECTATOR_LOCK_BACKEND="db")
def test_the_sweep_leaves_a_run_whose_lock_is_held(make_server: Any, enqueued: list) -> None:
    server = make_server()
    live = running(server)
    lock = Lock(server.pk, 60)
    assert lock.acquire()
    try:
        assert recover_lost_runs(lambda s, r: enqueued.append((s, r))) == 0
    finally:
        lock.release()
    live.refresh_from_db()
    assert live.status == "running" and not enqueued


def test_a_replacement_lost_again_is_not_retried_a_third_time(make_server: Any, enqueued: list) -> None:
    server = make_server()
    first = running(server)
    recover_lost_runs(lambda s, r: enqueued.append((s, r)))
    second = enqueued[0][1]
    ProbeRun.objects.filter(pk=second.pk).update(status="running", started_at=timezone.now())
    assert recover_lost_runs(lambda s, r: enqueued.append((s, r))) == 0
    second.refresh_from_db()
    assert second.status == "failed" and "lost twice in a row, not retried" in second.error
    assert ProbeRun.objects.filter(server=server).count() == 2 and first.pk != second.pk


@override_settings(SPECTATOR_LOCK_BACKEND="db")
def test_a_redelivered_running_run_waits_while_the_lock_is_held(make_server: Any) -> None:
    server = make_server()
    run = running(server)
    lock = Lock(server.pk, 60)
    assert lock.acquire()
    try:
        with pytest.raises(ServerBusy) as busy:
            run_probe_for_server(server.pk, run.trigger, run.pk)
        assert 50 < busy.value.retry_in_s <= 60
    finally:
        lock.release()
    run.refresh_from_db()
    assert run.status == "running"


def test_a_moved_confirmation_link_follows_the_replacement(make_server: Any, enqueued: list) -> None:
    server = make_server()
    suspect = queue_run(server, ProbeRun.Trigger.SCHEDULED)
    lost = running(server, confirms=suspect)
    recover_lost_runs(lambda s, r: enqueued.append((s, r)))
    lost.refresh_from_db()
    assert lost.confirms is None and enqueued[0][1].confirms == suspect


@pytest.mark.parametrize("backend", ["db", pytest.param("redis", marks=pytest.mark.skipif(
    not __import__("tests.collectors.test_lock", fromlist=["redis_up"]).redis_up(),
    reason="no Redis on 127.0.0.1:6379"))])
def test_a_held_lock_is_renewed_until_released(backend: str, make_server: Any, settings: Any) -> None:
    settings.SPECTATOR_LOCK_BACKEND = backend
    server = make_server()
    lock = Lock(server.pk, 6)  # renewed every 2 s back to 6 s
    assert lock.acquire()
    lock.keep_alive()
    try:
        wait_for(lambda: remaining_s(server.pk) < 4.5, 20, "the lock to age past a renewal period")
        wait_for(lambda: remaining_s(server.pk) > 5, 20, "a renewal to push the expiry back")
    finally:
        lock.release()
    assert remaining_s(server.pk) == 0
