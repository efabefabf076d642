from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_refuses_a_probe_post_without_the_csrf_token(operator: Any, make_server: Any, sent_probes: Any) -> None:
    server = make_server()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.post(f"/servers/{server.pk}/probe/").status_code == 403
    assert server.probe_runs.count() == 0


def test_it_accepts_a_probe_post_with_the_page_csrf_token(operator: Any, make_server: Any, sent_probes: Any) -> None:
    server = make_server()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    page = browser.get(f"/servers/{server.pk}/").content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    r = browser.post(f"/servers/{server.pk}/probe/", {"csrfmiddlewaretoken": token})
    assert r.status_code == 302
    assert server.probe_runs.count() == 1


def test_it_refuses_a_server_form_post_without_the_csrf_token(staff: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    assert browser.post("/servers/add/", {"name": "x", "base_url": "http://x"}).status_code == 403
