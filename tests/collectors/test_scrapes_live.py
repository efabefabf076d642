"""Scrapes of the real bundled engine: raw samples, τ from its counters, and a restart's reset."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from collectors.scraping import scrape_server
from tests.engine.server.helpers import sample, scrape, start_server, stop_server

pytestmark = pytest.mark.django_db

WINDOW_FIELDS = ("steps", "drafted", "accepted", "generation_tokens", "prompt_tokens", "requests")


def generate(url: str, tokens: int = 48) -> None:
    body = {"prompt": "def parse(line):\n", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    httpx.post(url + "/v1/completions", json=body, timeout=60).raise_for_status()


def test_it_stores_samples_and_the_engines_tau(engine: Any, make_server: Any) -> None:
    server = make_server("tiny", engine.url, kind="ddtree")
    with engine.client() as c:
        before = scrape(c)
        first = scrape_server(server)
        generate(engine.url)
        second = scrape_server(server)
        after = scrape(c)

    assert first.ok and second.ok and not second.reset
    assert second.samples.count() > 20
    assert second.samples.filter(name="ddtree:spec_decode_num_drafts_total").exists()
    drafts, accepted = (
        sample(after, f"ddtree:spec_decode_num_{name}_total") - sample(before, f"ddtree:spec_decode_num_{name}_total")
        for name in ("drafts", "accepted_tokens")
    )
    assert second.steps == drafts > 0
    assert second.tau == pytest.approx(1 + accepted / drafts)
    assert second.generation_tokens == 48 and second.requests == 1


def test_it_gives_no_negative_rates_across_a_restart(make_server: Any) -> None:
    old = start_server()
    try:
        server = make_server("tiny", old.url, kind="ddtree")
        for _ in range(3):
            generate(old.url, 64)
        scrape_server(server)
    finally:
        stop_server(old)
    new = start_server()  # a restarted engine: its counters start again from zero
    try:
        server.base_url = new.url
        server.save()
        generate(new.url, 16)
        after_restart = scrape_server(server)
    finally:
        stop_server(new)

    assert after_restart.ok and after_restart.reset
    for field in WINDOW_FIELDS:
        assert getattr(after_restart, field) is None or getattr(after_restart, field) >= 0, field
    assert after_restart.generation_tokens == 16
    assert after_restart.tau is not None and after_restart.tau >= 1
