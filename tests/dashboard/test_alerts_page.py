"""The alerts page: who sees it, who may triage, CSRF on the actions, the test e-mail button."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.test import Client

from collectors.alerts import open_alert
from collectors.detection.series import DECODE_TPS, SeriesKey
from collectors.models import Alert, Notification, Subscription

pytestmark = pytest.mark.django_db


@pytest.fixture
def alert(make_server: Any) -> Alert:
    opened = open_alert(make_server(name="gpu-7"), Alert.Kind.THROUGHPUT_REGRESSION, SeriesKey(DECODE_TPS, 64),
                        old_level=100.0, old_spread=1.0, new_level=70.0, new_spread=2.0, rel_change=-0.3)
    assert opened is not None
    return opened


def test_it_lists_open_alerts_for_a_viewer_without_actions(client: Any, viewer: Any, alert: Alert) -> None:
    client.force_login(viewer)
    page = client.get("/alerts/").content.decode()
    assert f'id="alert-{alert.pk}"' in page and "gpu-7" in page
    assert "acknowledge</button>" not in page and "Send test e-mail" not in page


def test_it_links_the_alerts_page_from_the_navigation(client: Any, viewer: Any) -> None:
    client.force_login(viewer)
    assert 'href="/alerts/"' in client.get("/").content.decode()


def test_it_hides_the_page_from_an_outsider(client: Any, charlie: Any) -> None:
    client.force_login(charlie)
    assert client.get("/alerts/").status_code == 403


def test_it_forbids_a_viewer_to_acknowledge(client: Any, viewer: Any, alert: Alert) -> None:
    client.force_login(viewer)
    assert client.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 403
    assert Alert.objects.get(pk=alert.pk).state == "open"


def test_it_lets_an_operator_acknowledge_then_resolve(client: Any, operator: Any, alert: Alert) -> None:
    client.force_login(operator)
    assert client.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 302
    assert client.post(f"/alerts/{alert.pk}/resolve/").status_code == 302
    assert [(e.to_state, e.by) for e in alert.events.all()] == [("open", None), ("acknowledged", operator),
                                                                ("resolved", operator)]


def test_it_requires_a_note_for_a_false_positive(client: Any, operator: Any, alert: Alert) -> None:
    client.force_login(operator)
    client.post(f"/alerts/{alert.pk}/false-positive/", {"note": ""})
    assert Alert.objects.get(pk=alert.pk).state == "open"
    client.post(f"/alerts/{alert.pk}/false-positive/", {"note": "a noisy neighbour on the GPU"})
    alert.refresh_from_db()
    assert alert.state == "false_positive" and alert.note == "a noisy neighbour on the GPU"


def test_it_refuses_an_unknown_action_and_a_get(client: Any, operator: Any, alert: Alert) -> None:
    client.force_login(operator)
    assert client.post(f"/alerts/{alert.pk}/delete/").status_code == 404
    assert client.get(f"/alerts/{alert.pk}/resolve/").status_code == 405


def test_it_refuses_an_action_without_the_csrf_token(operator: Any, alert: Alert) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 403
    page = browser.get("/alerts/").content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    assert browser.post(f"/alerts/{alert.pk}/acknowledge/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert Alert.objects.get(pk=alert.pk).state == "acknowledged"


def test_it_sends_a_test_email_to_the_operator(client: Any, operator: Any) -> None:
    client.force_login(operator)
    r = client.post("/alerts/test-email/", follow=True)
    assert "Test e-mail sent to dave@example.org" in r.content.decode()
    assert mail.outbox[0].to == ["dave@example.org"] and mail.outbox[0].subject == "[Spectator] Test e-mail"
    assert Notification.objects.get().state == "sent"  # the attempt is on record too


def test_it_shows_a_failed_test_email(client: Any, staff: Any, settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", 9, False  # nothing listens
    client.force_login(staff)
    page = client.post("/alerts/test-email/", follow=True).content.decode()
    assert "Test e-mail to erin@example.org failed: ConnectionRefusedError" in page
    assert Notification.objects.get().state == "failed"


def test_it_forbids_a_viewer_the_test_email(client: Any, viewer: Any) -> None:
    client.force_login(viewer)
    assert client.post("/alerts/test-email/").status_code == 403 and mail.outbox == []


def test_it_lets_a_viewer_subscribe_and_unsubscribe(client: Any, viewer: Any, make_server: Any) -> None:
    server = make_server()
    client.force_login(viewer)
    client.post(f"/servers/{server.pk}/subscribe/")
    assert Subscription.objects.get().user == viewer
    client.post(f"/servers/{server.pk}/subscribe/")
    assert not Subscription.objects.exists()


def test_it_lets_only_staff_add_a_plain_address(client: Any, operator: Any, staff: Any, make_server: Any) -> None:
    server = make_server()
    client.force_login(operator)
    assert client.post(f"/servers/{server.pk}/subscribers/", {"email": "ops@example.org"}).status_code == 403
    client.force_login(staff)
    client.post(f"/servers/{server.pk}/subscribers/", {"email": "Ops@Example.org"})
    client.post(f"/servers/{server.pk}/subscribers/", {"email": "not an address"})
    assert list(Subscription.objects.values_list("email", flat=True)) == ["ops@example.org"]
