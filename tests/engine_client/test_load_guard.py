"""A probe that overlaps other traffic is kept but marked contaminated, with the reason."""

from __future__ import annotations

import threading

import httpx

from engine_client import EngineClient, ProbePlan, parse_metrics, run_probe
from tests.engine.server.helpers import Server, wait_for

PLAN = ProbePlan(contexts=(64,), outputs=(), n1=8, n2=24, repeats=1, stream_check=False, warmup_tokens=0)


def test_it_marks_a_probe_contaminated_when_a_concurrent_request_runs(engine: Server, client: EngineClient) -> None:
    done = threading.Event()

    def other_traffic() -> None:
        try:
            httpx.post(engine.url + "/v1/completions", timeout=120,
                       json={"prompt": "def main():\n", "max_tokens": 600, "ignore_eos": True, "temperature": 0})
        finally:
            done.set()

    thread = threading.Thread(target=other_traffic, daemon=True)
    thread.start()
    wait_for(lambda: (parse_metrics(client.metrics_text()).running or 0) >= 1, 30, "the other request to run")
    steps: list[str] = []
    report = run_probe(client, PLAN, progress=steps.append)
    assert report.contaminated
    assert "busy" in report.contamination_reason or "other request" in report.contamination_reason
    assert report.load_before["running"] == 1
    assert report.measurements and steps[0] == "fingerprint" and steps[-1] == "done"
    assert done.wait(120)
    thread.join(5)
