from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from collectors.locks import Lock, is_locked

REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_up() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping())
    except Exception:
        return False


BACKENDS = [
    pytest.param({"SPECTATOR_LOCK_BACKEND": "db"}, id="db"),
    pytest.param(
        {"SPECTATOR_LOCK_BACKEND": "redis", "CELERY_BROKER_URL": REDIS_URL},
        id="redis",
        marks=pytest.mark.skipif(not redis_up(), reason="no Redis on 127.0.0.1:6379"),
    ),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("backend", BACKENDS)
def test_it_lets_one_of_two_concurrent_acquirers_win(backend: dict[str, str], make_server: Any) -> None:
    server = make_server()
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def contender() -> None:
        try:
            barrier.wait()
            results.append(Lock(server.pk, ttl_s=30).acquire())
        finally:
            connections.close_all()

    with override_settings(**backend):
        threads = [threading.Thread(target=contender) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [False, True]
        assert is_locked(server.pk)
        _force_release(server.pk)


def _force_release(server_id: int) -> None:
    from django.conf import settings

    from collectors.locks import _redis, _redis_key, backend
    from collectors.models import ServerLease

    if backend() == "redis":
        _redis(settings.CELERY_BROKER_URL).delete(_redis_key(server_id))
    ServerLease.objects.filter(server_id=server_id).delete()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("backend", BACKENDS)
def test_it_frees_the_server_when_the_holder_releases_or_expires(backend: dict[str, str], make_server: Any) -> None:
    server = make_server()
    with override_settings(**backend):
        first = Lock(server.pk, ttl_s=30)
        assert first.acquire()
        assert not Lock(server.pk, ttl_s=30).acquire()
        first.release()
        assert not is_locked(server.pk)

        killed = Lock(server.pk, ttl_s=0.3)  # a worker that dies holding the lock never releases it
        assert killed.acquire()
        deadline = time.monotonic() + 5
        while is_locked(server.pk) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivor = Lock(server.pk, ttl_s=30)
        assert survivor.acquire()
        killed.release()  # a late release by the dead holder must not free the survivor's lock
        assert is_locked(server.pk)
        survivor.release()
