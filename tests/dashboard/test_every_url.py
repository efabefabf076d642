"""Every URL pattern, walked: who may GET it and who may POST to it (issue 8: roles on every view and
action, CSRF on every POST). A new URL fails the first test until it is classified in ACCESS."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db

PUBLIC, OWN_AUTH, READER, OPERATOR, STAFF = "public", "own-auth", "reader", "operator", "staff"
RANK = {READER: 1, OPERATOR: 2, STAFF: 3}
# name → (who, methods the view accepts)
ACCESS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dashboard-health": (PUBLIC, ("GET",)),
    "dashboard-metrics": (OWN_AUTH, ("GET",)),  # staff, an allowed address or the token; never a redirect
    "dashboard-login": (PUBLIC, ("GET", "POST")),
    "dashboard-logout": (PUBLIC, ("POST",)),
    "dashboard-asset": (PUBLIC, ("GET",)),
    "dashboard-fleet": (READER, ("GET",)),
    "dashboard-fleet-rows": (READER, ("GET",)),  # the fleet page's live fragment
    "dashboard-server": (READER, ("GET",)),
    "dashboard-server-live": (READER, ("GET",)),  # the server page's live fragment
    "dashboard-run": (READER, ("GET",)),
    "dashboard-run-status": (READER, ("GET",)),
    "dashboard-alerts": (READER, ("GET",)),
    "dashboard-subscribe": (READER, ("POST",)),  # a reader subscribes themself
    "dashboard-probe-now": (OPERATOR, ("POST",)),
    "dashboard-alert-action": (OPERATOR, ("POST",)),
    "dashboard-alert-test-email": (OPERATOR, ("POST",)),
    "dashboard-server-add": (STAFF, ("GET", "POST")),
    "dashboard-server-edit": (STAFF, ("GET", "POST")),
    "dashboard-subscriber-add": (STAFF, ("POST",)),
    "dashboard-subscriber-remove": (STAFF, ("POST",)),
}


def _names(patterns: list[Any], namespace: str = "") -> list[str]:
    names: list[str] = []
    for p in patterns:
        if isinstance(p, URLResolver):
            if p.namespace == "admin":
                continue  # Django's admin: its own staff check, tested below
            names += _names(p.url_patterns, p.namespace or namespace)
        elif isinstance(p, URLPattern):
            names.append(p.name or f"<unnamed {p.pattern}>")
    return names


@pytest.fixture
def urls(make_server: Any, store_run: Any) -> dict[str, str]:
    from collectors.models import Alert, Subscription

    server = make_server()
    run = store_run(server, {64: 100.0})
    alert = Alert.objects.create(server=server, kind=Alert.Kind.choices[0][0], quantity="decode_tps", context=64)
    sub = Subscription.objects.create(server=server, email="ops@example.org")
    args = {
        "dashboard-asset": {"version": "1", "name": "htmx.min.js"},
        "dashboard-server": {"server_id": server.pk}, "dashboard-server-edit": {"server_id": server.pk},
        "dashboard-server-live": {"server_id": server.pk},
        "dashboard-probe-now": {"server_id": server.pk}, "dashboard-subscribe": {"server_id": server.pk},
        "dashboard-subscriber-add": {"server_id": server.pk},
        "dashboard-run": {"run_id": run.pk}, "dashboard-run-status": {"run_id": run.pk},
        "dashboard-alert-action": {"alert_id": alert.pk, "action": "acknowledge"},
        "dashboard-subscriber-remove": {"subscription_id": sub.pk},
    }
    return {name: reverse(name, kwargs=args.get(name)) for name in ACCESS}


def _state() -> tuple[Any, ...]:
    """Everything an action could change; equal before and after = nothing happened."""
    from collectors.models import Alert, ProbeRun, Server, Subscription

    return (ProbeRun.objects.count(), Server.objects.count(), list(Server.objects.values_list("name", "base_url")),
            Subscription.objects.count(), list(Alert.objects.values_list("state", flat=True)))


def _do(client: Client, method: str, url: str) -> Any:
    return client.get(url) if method == "GET" else client.post(url, {"email": "x@example.org", "name": "x"})


def test_it_classifies_every_url_pattern() -> None:
    assert sorted(_names(get_resolver().url_patterns)) == sorted(ACCESS)


def test_it_sends_anonymous_visitors_to_the_login_on_every_protected_url(client: Client, urls: dict[str, str]) -> None:
    before = _state()
    for name, (who, methods) in ACCESS.items():
        for method in methods:
            r = _do(client, method, urls[name])
            if who == PUBLIC:
                assert r.status_code in (200, 302), (name, method)
            elif who == OWN_AUTH:
                assert r.status_code == 403, (name, method)
            else:
                assert r.status_code == 302 and r["Location"].startswith("/login/?next="), (name, method)
    assert _state() == before


@pytest.mark.parametrize("role", ["outsider", READER, OPERATOR])
def test_it_refuses_every_url_above_the_role(role: str, client: Client, urls: dict[str, str], charlie: Any,
                                             viewer: Any, operator: Any, sent_probes: Any) -> None:
    user = {"outsider": charlie, READER: viewer, OPERATOR: operator}[role]
    client.force_login(user)
    rank = RANK.get(role, 0)
    before = _state()
    for name, (who, methods) in ACCESS.items():
        if who not in RANK or RANK[who] <= rank:
            continue
        for method in methods:
            assert _do(client, method, urls[name]).status_code == 403, (role, name, method)
    assert _state() == before and sent_probes == []


@pytest.mark.parametrize("role", [READER, OPERATOR, STAFF])
def test_it_lets_each_role_read_every_page(role: str, client: Client, urls: dict[str, str], viewer: Any,
                                          operator: Any, staff: Any) -> None:
    client.force_login({READER: viewer, OPERATOR: operator, STAFF: staff}[role])
    for name, (who, methods) in ACCESS.items():
        if who in RANK and RANK[who] <= RANK[role] and "GET" in methods:
            assert client.get(urls[name]).status_code == 200, (role, name)


def test_it_keeps_the_admin_for_staff(client: Client, viewer: Any, operator: Any) -> None:
    assert client.get("/admin/").status_code == 302  # anonymous → the admin's login
    client.force_login(operator)  # not is_staff
    assert client.get("/admin/").status_code == 302
    assert client.get("/admin/collectors/server/").status_code == 302


def test_it_refuses_every_post_without_a_csrf_token(urls: dict[str, str], alice: Any, sent_probes: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    anonymous = Client(enforce_csrf_checks=True)
    assert anonymous.post(urls["dashboard-login"], {"username": "alice", "password": "alice-password"}).status_code \
        == 403
    browser.force_login(alice)  # a superuser: every action would be allowed with the token
    before = _state()
    posts = [name for name, (_, methods) in ACCESS.items() if "POST" in methods and name != "dashboard-login"]
    assert len(posts) >= 9
    for name in posts:
        assert browser.post(urls[name], {"email": "x@example.org"}).status_code == 403, name
    assert _state() == before and sent_probes == []
    assert browser.get(urls["dashboard-fleet"]).status_code == 200  # still logged in: logout was refused too
