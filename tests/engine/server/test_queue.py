"""A bounded FIFO queue: one running, `--max-queue-length` waiting, the next gets 503 + Retry-After;
a client that disconnects cancels its generation and frees the model for the next request."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from httpx_sse import connect_sse

from tests.engine.server.helpers import Server, sample, scrape, start_server, stop_server, wait_for

LONG = {"text": "def f():\n", "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True, "temperature": 0},
        "stream": True}
SHORT = {"text": "y = ", "sampling_params": {"max_new_tokens": 5, "temperature": 0}}


@pytest.fixture(scope="module")
def small_queue_server() -> Iterator[Server]:
    s = start_server(env={"ENGINE_MAX_QUEUE_LENGTH": "1"})  # set through the environment twin
    yield s
    stop_server(s)


def test_it_refuses_beyond_the_queue_and_cancels_on_disconnect(small_queue_server: Server) -> None:
    with small_queue_server.client() as http, ThreadPoolExecutor(1) as pool:
        with connect_sse(http, "POST", "/generate", json=LONG) as running:
            events = running.iter_sse()  # keep a reference: dropping the iterator closes the connection
            next(events)  # the long request is on the model loop
            queued = pool.submit(http.post, "/generate", json=SHORT)
            wait_for(lambda: sample(scrape(http), "ddtree:num_requests_waiting") == 1, 10, "one waiting request")

            refused = http.post("/generate", json=SHORT)
            assert refused.status_code == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert "queue is full" in refused.json()["error"]["message"]
        # Leaving the block closed the stream: the long generation must stop, and the queued one run.
        done = queued.result(timeout=30)
        assert done.status_code == 200 and done.json()["meta_info"]["completion_tokens"] == 5
        cancelled = wait_for(lambda: sample(scrape(http), "ddtree:requests_total", finished_reason="cancelled"),
                             10, "the disconnected request to be cancelled")
        assert cancelled == 1
        assert sample(scrape(http), "ddtree:generation_tokens_total") < 4000 + 5
