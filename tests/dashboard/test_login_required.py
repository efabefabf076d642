from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _pages(server_id: int, run_id: int) -> list[str]:
    return ["/", f"/servers/{server_id}/", f"/runs/{run_id}/", f"/runs/{run_id}/status/", "/servers/add/",
            f"/servers/{server_id}/edit/"]


def test_it_sends_anonymous_visitors_of_every_page_to_the_login(client: Any, make_server: Any, store_run: Any) -> None:
    server = make_server()
    run = store_run(server, {64: 100.0})
    for url in _pages(server.pk, run.pk):
        r = client.get(url)
        assert r.status_code == 302, url
        assert r["Location"].startswith("/login/?next="), url
    assert client.post(f"/servers/{server.pk}/probe/").status_code == 302


def test_it_answers_health_and_the_login_page_without_a_login(client: Any) -> None:
    assert client.get("/health").status_code == 200
    r = client.get("/login/")
    assert r.status_code == 200
    assert b'name="password"' in r.content


def test_it_logs_a_viewer_in_and_out(client: Any, viewer: Any) -> None:
    r = client.post("/login/", {"username": "bob", "password": "bob-password"})
    assert r.status_code == 302 and r["Location"] == "/"
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


def test_it_shows_outsiders_nothing(client: Any, charlie: Any, make_server: Any, store_run: Any) -> None:
    # Logged in but in no role: every page is forbidden.
    server = make_server()
    run = store_run(server, {64: 100.0})
    client.force_login(charlie)
    for url in _pages(server.pk, run.pk):
        assert client.get(url).status_code == 403, url


def test_it_serves_plotly_and_htmx_from_the_installed_packages(client: Any, viewer: Any) -> None:
    client.force_login(viewer)
    page = client.get("/").content.decode()
    for name in ("plotly.min.js", "htmx.min.js"):
        url = page.split(f'/{name}"')[0].rsplit('src="', 1)[1] + f"/{name}"
        r = client.get(url)
        assert r.status_code == 200, url
        assert r["Content-Type"] == "text/javascript"
        assert len(b"".join(r.streaming_content)) > 10_000
    # Nothing is fetched from another host (a CDN): every src and href is a path on this server. (A
    # substring test for "cdn" failed whenever the page's random CSRF token happened to contain it.)
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)
