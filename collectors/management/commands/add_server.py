"""`manage.py add_server NAME URL [--kind K] [--probe-interval S] [--scrape-interval S] [plan options]`

Creates or updates (by name) a monitored server; the model's validators apply (URL scheme, plan bounds).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.models import Server


def int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"expected comma-separated integers, got {text!r}") from None


class Command(BaseCommand):
    help = "Register (or update) a server to monitor."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("url", help="base URL, e.g. http://127.0.0.1:30000")
        parser.add_argument("--kind", default="auto", choices=[k.value for k in Server.Kind])
        parser.add_argument("--api-key", default="", help="bearer token (stored, never printed)")
        parser.add_argument("--probe-interval", type=int, default=3600, help="seconds between probes")
        parser.add_argument("--scrape-interval", type=int, default=30, help="seconds between scrapes")
        parser.add_argument("--disabled", action="store_true")
        parser.add_argument("--contexts", type=int_list, help="e.g. 64,1024,3072,5120")
        parser.add_argument("--outputs", type=int_list, help="e.g. 200,600,1200 (empty: no output sweep)")
        parser.add_argument("--n1", type=int)
        parser.add_argument("--n2", type=int)
        parser.add_argument("--repeats", type=int)
        parser.add_argument("--no-stream-check", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        plan_keys = ("contexts", "outputs", "n1", "n2", "repeats")
        plan: dict[str, Any] = {k: opts[k] for k in plan_keys if opts[k] is not None}
        if opts["no_stream_check"]:
            plan["stream_check"] = False
        server = Server.objects.filter(name=opts["name"]).first() or Server(name=opts["name"])
        server.base_url = opts["url"]
        server.kind = opts["kind"]
        server.api_key = opts["api_key"] or server.api_key
        server.probe_interval_s = opts["probe_interval"]
        server.scrape_interval_s = opts["scrape_interval"]
        server.enabled = not opts["disabled"]
        server.probe_plan = plan
        try:
            server.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        created = server.pk is None
        server.save()
        self.stdout.write(f"{'added' if created else 'updated'} server {server.pk}: {server.name} {server.base_url}")
