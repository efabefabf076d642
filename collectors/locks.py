"""A per-server lock so that two probes never overlap on one server, even across workers and hosts.

Two backends behind one function, `server_lock(server_id, ttl_s)`:
- Redis (when the broker is Redis): SET NX with an expiry via redis-py's Lock; release checks the token.
- Database (otherwise): a ServerLease row claimed with a conditional UPDATE (holder empty or expired);
  exactly one row changed = we hold it (STYLE 4).
Both expire, so a worker killed mid-probe (time limit, OOM, power) frees the server after `ttl_s`.
While held, a daemon thread renews the lock every third of `ttl_s` (`renew=True`), so the TTL can be short
(a minute) whatever the probe's length: a dead worker's lock is gone a minute after it died, and a lock
that is free while its run says `running` proves that run's worker is dead (collectors/FAULTS.md).
"""

from __future__ import annotations

import logging
import threading
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

log = logging.getLogger(__name__)


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
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()

    def acquire(self) -> bool:
        if backend() == "redis":
            # thread_local=False: the renewal thread must see the token the acquiring thread got.
            self._redis_lock = _redis(settings.CELERY_BROKER_URL).lock(
                _redis_key(self.server_id), timeout=self.ttl_s, blocking=False, thread_local=False
            )
            self.acquired = bool(self._redis_lock.acquire(blocking=False))
        else:
            self.acquired = _db_acquire(self.server_id, self.owner, self.ttl_s)
        return self.acquired

    def keep_alive(self) -> None:
        """Renew the lock every ttl/3 on a daemon thread until `release` (it dies with the process)."""
        if not self.acquired or self._renewer is not None:
            return
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name=f"probe-lock-{self.server_id}", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        try:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    renewed = self._renew()
                except Exception:  # noqa: BLE001 - a broker or database blip: try again at the next beat
                    log.warning("renewing the probe lock of server %s failed", self.server_id, exc_info=True)
                    continue
                if not renewed:
                    log.warning("the probe lock of server %s expired while held", self.server_id)
                    return
        finally:
            if self._redis_lock is None:
                from django.db import connection

                connection.close()  # this thread's own database connection

    def _renew(self) -> bool:
        if self._redis_lock is not None:
            import redis.exceptions

            try:
                return bool(self._redis_lock.reacquire())
            except redis.exceptions.LockNotOwnedError:
                return False
        expires = timezone.now() + timedelta(seconds=self.ttl_s)
        return ServerLease.objects.filter(server_id=self.server_id, owner=self.owner).update(expires_at=expires) == 1

    def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        if self._renewer is not None:
            self._stop.set()
            self._renewer.join(timeout=10)
            self._renewer = None
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


def remaining_s(server_id: int) -> float:
    """Seconds until the lock on this server expires if nobody renews it (0 when free)."""
    if backend() == "redis":
        ms = _redis(settings.CELERY_BROKER_URL).pttl(_redis_key(server_id))
        return max(ms, 0) / 1000
    lease = ServerLease.objects.filter(server_id=server_id).exclude(owner="").first()
    if lease is None or lease.expires_at is None:
        return 0.0
    return max((lease.expires_at - timezone.now()).total_seconds(), 0.0)


@contextmanager
def server_lock(server_id: int, ttl_s: float, *, renew: bool = False) -> Iterator[Lock]:
    """`with server_lock(id, ttl) as lock: if lock.acquired: ...` — released on exit either way;
    `renew`: kept alive while held (see `Lock.keep_alive`)."""
    lock = Lock(server_id, ttl_s)
    lock.acquire()
    if renew:
        lock.keep_alive()
    try:
        yield lock
    finally:
        lock.release()
