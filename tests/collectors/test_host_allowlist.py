"""SPECTATOR_ALLOWED_SERVER_HOSTS (issue 8, server-side request forgery): which hosts pass, and that a probe
or scrape of a host outside it fails with the reason and sends nothing, even for a row written around the form."""

from __future__ import annotations

from typing import Any

import pytest

from tests.collectors.http_stub import http_stub

pytestmark = pytest.mark.django_db

METRICS = b"# TYPE ddtree:prompt_tokens_total counter\nddtree:prompt_tokens_total 5\n"


def test_it_decides_by_network_by_listed_name_and_by_resolved_address() -> None:
    from collectors.hosts import refusal

    allowed = ["10.0.0.0/8", "gpu-box.lan", ".gpu.example.org"]
    assert refusal("10.1.2.3", allowed) == ""
    assert "not in SPECTATOR_ALLOWED_SERVER_HOSTS" in refusal("192.168.1.1", allowed)
    assert refusal("169.254.169.254", allowed)  # the cloud metadata address
    assert refusal("gpu-box.lan", allowed) == ""  # a listed name is trusted as it is, without DNS
    assert refusal("a.gpu.example.org", allowed) == "" and refusal("gpu.example.org", allowed) == ""
    assert refusal("evilgpu.example.org", allowed)
    assert "resolves to 127.0.0.1" in refusal("localhost", allowed)  # a name that points inside
    assert refusal("localhost", ["127.0.0.0/8", "::1"]) == ""
    assert refusal("[::1]", ["::1"]) == ""
    assert refusal("anything.example", []) == ""  # empty: no restriction


def _answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, str, bytes]:
    return 200, "text/plain; version=0.0.4", METRICS


def test_it_refuses_to_probe_or_scrape_a_host_outside_the_allowlist(make_server: Any, settings: Any) -> None:
    from collectors.models import ProbeRun, Scrape
    from collectors.probing import ProbeFailed, run_probe_for_server
    from collectors.scraping import scrape_server

    settings.SPECTATOR_ALLOWED_SERVER_HOSTS = ["10.0.0.0/8"]
    with http_stub(_answer) as stub:
        server = make_server(url=stub.url)  # written straight to the table, as a stale row or a script would
        with pytest.raises(ProbeFailed) as failed:
            run_probe_for_server(server.pk, ProbeRun.Trigger.MANUAL)
        assert not failed.value.transient  # no retry: waiting will not make the host allowed
        run = ProbeRun.objects.get(server=server)
        assert run.status == "failed" and "'127.0.0.1' is not in SPECTATOR_ALLOWED_SERVER_HOSTS" in run.error
        scrape = scrape_server(server)
        assert not scrape.ok and "not in SPECTATOR_ALLOWED_SERVER_HOSTS" in scrape.error
        assert stub.requests == []  # nothing was sent
        # The same server once its network is allowed: the stub is reachable (the check above was the reason).
        settings.SPECTATOR_ALLOWED_SERVER_HOSTS = ["127.0.0.0/8"]
        assert scrape_server(server).ok and [r[1] for r in stub.requests] == ["/metrics"]
        assert Scrape.objects.filter(server=server).count() == 3
