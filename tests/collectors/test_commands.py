"""The management commands: add_server validates and upserts; probe runs synchronously and prints."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from collectors.models import ProbeRun, Server

pytestmark = pytest.mark.django_db


def test_it_adds_then_updates_a_server_by_name() -> None:
    out = StringIO()
    call_command("add_server", "box", "http://127.0.0.1:30000", "--kind", "vllm", "--contexts", "64,1024",
                 "--n1", "16", "--n2", "64", "--api-key", "sk-secret", stdout=out)
    assert "added server" in out.getvalue() and "sk-secret" not in out.getvalue()
    call_command("add_server", "box", "https://llm.example.org", "--probe-interval", "600", stdout=StringIO())
    server = Server.objects.get()
    assert (server.base_url, server.probe_interval_s, server.api_key) == ("https://llm.example.org", 600, "sk-secret")


def test_it_refuses_a_bad_url_or_plan() -> None:
    with pytest.raises(CommandError, match="base_url"):
        call_command("add_server", "box", "ftp://x.example.org", stdout=StringIO())
    with pytest.raises(CommandError, match="probe_plan"):
        call_command("add_server", "box", "http://127.0.0.1:1", "--n1", "64", "--n2", "32", stdout=StringIO())
    assert not Server.objects.exists()


def test_it_probes_synchronously_and_prints_the_table(engine: Any, make_server: Any) -> None:
    make_server("tiny", engine.url, kind="ddtree",
                probe_plan={"contexts": [64], "outputs": [], "n1": 16, "n2": 64, "repeats": 1})
    out = StringIO()
    call_command("probe", "tiny", stdout=out)
    run = ProbeRun.objects.get()
    assert run.status == "succeeded" and run.trigger == "manual"
    assert "decode tok/s" in out.getvalue() and "two_point" in out.getvalue()


def test_it_reports_a_failed_probe(make_server: Any) -> None:
    make_server("gone", "http://127.0.0.1:9")
    with pytest.raises(CommandError, match="failed: ConnectError"):
        call_command("probe", "gone", stdout=StringIO())


def test_it_stores_a_failed_scrape_with_its_reason(make_server: Any) -> None:
    from collectors.scraping import scrape_server

    scrape = scrape_server(make_server("gone", "http://127.0.0.1:9"))
    assert not scrape.ok and "ConnectError" in scrape.error and scrape.tau is None
