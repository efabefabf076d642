"""Shared persona fixtures for the Django suites (tests/collectors, tests/dashboard)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def alice(db: Any) -> Any:
    """The owner: a superuser who registers servers and triggers probes."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("alice", "alice@example.org", "alice-password")


@pytest.fixture
def bob(db: Any) -> Any:
    """A viewer: staff, no superuser rights."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("bob", "bob@example.org", "bob-password", is_staff=True)


@pytest.fixture
def charlie(db: Any) -> Any:
    """An outsider: a plain account."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("charlie", "charlie@example.org", "charlie-password")


@pytest.fixture
def make_server(db: Any) -> Any:
    from collectors.models import Server

    def make(name: str = "gpu-box", url: str = "http://127.0.0.1:9", **fields: Any) -> Server:
        return Server.objects.create(name=name, base_url=url, **fields)

    return make
