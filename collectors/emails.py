"""E-mails as template triplets (STYLE 7, healthchecks `hc/lib/emails.py`): one small function per kind.

`emails/<name>-subject.txt`, `emails/<name>.txt` and `emails/<name>.html` under collectors/templates/.
Each function returns the message unsent: collectors/notify.py sends it and records the attempt.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string


def _message(name: str, to: str, ctx: dict[str, Any]) -> EmailMultiAlternatives:
    ctx = {"site_url": settings.SPECTATOR_SITE_URL, **ctx}
    # A subject is one line: template line breaks would be a header injection waiting to happen.
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", ctx).split())
    text = render_to_string(f"emails/{name}.txt", ctx)
    html = render_to_string(f"emails/{name}.html", ctx)
    msg = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, [to])
    msg.attach_alternative(html, "text/html")
    return msg


def alert_opened(to: str, ctx: dict[str, Any]) -> EmailMultiAlternatives:
    return _message("alert-opened", to, ctx)


def alert_resolved(to: str, ctx: dict[str, Any]) -> EmailMultiAlternatives:
    return _message("alert-resolved", to, ctx)


def test_email(to: str, ctx: dict[str, Any]) -> EmailMultiAlternatives:
    return _message("test", to, ctx)
