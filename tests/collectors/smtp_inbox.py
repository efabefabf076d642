"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts, for the e-mail tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message

from tests.engine.server.helpers import free_port


class Inbox(Message):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Any] = []
        self.port = 0

    def handle_message(self, message: Any) -> None:
        self.messages.append(message)

    def parsed(self) -> list[EmailMessage]:
        return [message_from_bytes(m.as_bytes(), policy=policy.default) for m in self.messages]  # type: ignore[misc]

    def env(self) -> dict[str, str]:
        """The environment that points a worker's Django e-mail settings at this server."""
        return {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(self.port), "EMAIL_USE_TLS": "0",
                "EMAIL_HOST_USER": "", "EMAIL_HOST_PASSWORD": "", "DEFAULT_FROM_EMAIL": "spectator@example.org"}


@contextmanager
def smtp_inbox() -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbox.port = controller.port
    try:
        yield inbox
    finally:
        controller.stop()
