from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_it_answers_health_with_the_database_up(client: Any) -> None:
    r = client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_it_lets_the_owner_into_every_admin_list(client: Any, alice: Any, make_server: Any) -> None:
    make_server()
    client.force_login(alice)
    for model in ("server", "proberun", "probemeasurement", "scrape", "rawsample", "serverlease"):
        assert client.get(f"/admin/collectors/{model}/").status_code == 200, model


def test_it_keeps_outsiders_out_of_the_admin(client: Any, charlie: Any) -> None:
    client.force_login(charlie)
    assert client.get("/admin/collectors/server/").status_code == 302
