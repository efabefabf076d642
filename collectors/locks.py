"""A per-server lock so that two probes never overlap on one server, even across workers and hosts.

Two backends behind one function, `server_lock(server_id, ttl_s)`:
- Redis (when the broker is Redis): SET NX with an expiry via redis-py's Lock; release checks the token.
- Database (otherwise): a ServerLease row claimed with a conditional UPDATE (holder empty or expired);
  exactly one row changed = we hold it (STYLE 4).
Both expire, so a worker killed mid-probe (time limit, OOM, power) frees the server after `ttl_s`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from collectors.models import ServerLease


def backend() -> str:
    chosen = settings.SPECTATOR_LOCK_BACKEND
    if chosen == "auto":
        return "redis" if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "db"
    return chosen


@cache
def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def _redis_key(server_id: int) -> str:
    # The database name is part of the key: test databases and several deployments may share one Redis.
    return f"spectator:{settings.DATABASES['default']['NAME']}:probe-lock:{server_id}"


class Lock:
    """A held (or not) lock; `acquired` says which. Release is idempotent and never raises."""

    def __init__(self, server_id: int, ttl_s: float) -> None:
        self.server_id = server_id
        self.ttl_s = ttl_s
        self.owner = uuid.uuid4().hex
        self.acquired = False
        self._redis_lock: Any = None

    def acquire(self) -> bool:
        if backend() == "redis":
            self._redis_lock = _redis(settings.CELERY_BROKER_URL).lock(
                _redis_key(self.server_id), timeout=self.ttl_s, blocking=False
            )
            self.acquired = bool(self._redis_lock.acquire(blocking=False))
        else:
            self.acquired = _db_acquire(self.server_id, self.owner, self.ttl_s)
        return self.acquired

    def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        if self._redis_lock is not None:
            import redis.exceptions

            try:
                self._redis_lock.release()
            except redis.exceptions.LockError:
                pass  # expired and maybe taken by another worker: nothing of ours left to release
        else:
            ServerLease.objects.filter(server_id=self.server_id, owner=self.owner).update(
                owner="", expires_at=None
            )


def _db_acquire(server_id: int, owner: str, ttl_s: float) -> bool:
    now = timezone.now()
    expires = now + timedelta(seconds=ttl_s)
    free = Q(owner="") | Q(expires_at__lt=now) | Q(expires_at__isnull=True)
    claimed = ServerLease.objects.filter(free, server_id=server_id).update(owner=owner, expires_at=expires)
    if claimed == 1:
        return True
    if ServerLease.objects.filter(server_id=server_id).exists():
        return False  # held by someone else and not expired
    try:
        with transaction.atomic():
            ServerLease.objects.create(server_id=server_id, owner=owner, expires_at=expires)
        return True
    except IntegrityError:
        return False  # another worker created the row first: it holds the lock


def is_locked(server_id: int) -> bool:
    """For tests and the UI: is a probe lock held (and not expired) on this server?"""
    if backend() == "redis":
        return bool(_redis(settings.CELERY_BROKER_URL).exists(_redis_key(server_id)))
    now = timezone.now()
    return ServerLease.objects.filter(server_id=server_id, expires_at__gte=now).exclude(owner="").exists()


@contextmanager
def server_lock(server_id: int, ttl_s: float) -> Iterator[Lock]:
    """`with server_lock(id, ttl) as lock: if lock.acquired: ...` — released on exit either way."""
    lock = Lock(server_id, ttl_s)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()
