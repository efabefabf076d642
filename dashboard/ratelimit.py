"""Fixed-window rate limits on Django's cache: failed logins and manual probes (issue 8).

Why not a library: django-ratelimit refuses (system check E003) the file and database caches that the
embedded, serverless install uses, and django-axes covers logins only, with its own models, middleware and
authentication backend. What we need is one counter per key and window, which is `cache.add` + `cache.incr`:
atomic on Redis (INCR, the production cache); on the file cache two processes can race on an increment,
which at worst lets an extra attempt or two through on a single machine.

1. `hit(scope, key, limit, window_s)` counts one event and says whether it went over the limit.
2. `peek(...)` reads the count without adding to it (is this caller already locked out?).
Keys are hashed, so a username or address never lands in a cache key as typed.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


@dataclass(frozen=True)
class Limit:
    count: int
    limit: int
    retry_after_s: int

    @property
    def exceeded(self) -> bool:
        return self.count > self.limit


def _key(scope: str, key: str, window_s: int) -> tuple[str, int]:
    window = int(time.time()) // window_s
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    retry_after = (window + 1) * window_s - int(time.time())
    return f"ratelimit:{scope}:{window}:{digest}", max(retry_after, 1)


def hit(scope: str, key: str, limit: int, window_s: int) -> Limit:
    cache_key, retry_after = _key(scope, key, window_s)
    cache.add(cache_key, 0, timeout=window_s + 1)
    try:
        count = cache.incr(cache_key)
    except ValueError:  # expired between add and incr: this event opens the next window
        cache.add(cache_key, 1, timeout=window_s + 1)
        count = 1
    return Limit(count, limit, retry_after)


def peek(scope: str, key: str, limit: int, window_s: int) -> Limit:
    cache_key, retry_after = _key(scope, key, window_s)
    return Limit(int(cache.get(cache_key, 0)), limit, retry_after)


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or the header a trusted reverse proxy sets (SPECTATOR_CLIENT_IP_HEADER)."""
    header = settings.SPECTATOR_CLIENT_IP_HEADER
    if header:
        value = request.headers.get(header, "")
        if value:
            return value.split(",")[-1].strip()  # X-Forwarded-For: the entry our proxy appended
    return request.META.get("REMOTE_ADDR", "")
