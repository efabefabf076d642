"""50 clients at once: the requests queue (the `ddtree:num_requests_waiting` gauge shows them while they
wait), none is lost or refused, and every one completes with the output it gets when sent alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.engine.server.helpers import Server, sample, scrape

CLIENTS = 50
TOKENS = 8
PROMPTS = ["def add(a, b):", "import os\n", "class Stack:\n", "for i in range(", "The quick brown fox"]


def body(i: int) -> dict:
    return {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True}


def test_it_queues_fifty_concurrent_clients_and_answers_them_all(server: Server) -> None:
    with server.client() as http:
        before = scrape(http)
    waiting_seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        with server.client() as http:
            while not done.is_set():
                waiting_seen.append(sample(scrape(http), "ddtree:num_requests_waiting"))

    def client(i: int) -> httpx.Response:
        with server.client(timeout=300) as http:
            return http.post("/v1/completions", json=body(i))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            responses = list(pool.map(client, range(CLIENTS)))
    finally:
        done.set()
        watcher.join(30)

    assert [r.status_code for r in responses] == [200] * CLIENTS, [r.text for r in responses if r.status_code != 200]
    answers = [r.json() for r in responses]
    assert all(a["usage"]["completion_tokens"] == TOKENS for a in answers)
    # The queue was visible while it lasted: many waiting at once, never more than all but the running one.
    assert max(waiting_seen) >= 10, waiting_seen[:50]
    assert max(waiting_seen) <= CLIENTS - 1
    assert max(a["spec"]["queue_seconds"] for a in answers) > 0

    with server.client() as http:
        after = scrape(http)
        # Each output is the one the same prompt gets alone (T = 0): queueing changed nothing.
        alone = {p: http.post("/v1/completions", json=body(i)).json()["choices"][0]["text"]
                 for i, p in enumerate(PROMPTS)}
    assert all(a["choices"][0]["text"] == alone[PROMPTS[i % len(PROMPTS)]] for i, a in enumerate(answers))
    # None lost: the server counted exactly 50 finished requests and their tokens, and its queue is empty.
    finished = "ddtree:requests_total"
    assert sample(after, finished, finished_reason="length") - sample(before, finished, finished_reason="length") \
        == CLIENTS
    assert sample(after, "ddtree:generation_tokens_total") - sample(before, "ddtree:generation_tokens_total") \
        == CLIENTS * TOKENS
    assert sample(after, "ddtree:num_requests_waiting") == 0 and sample(after, "ddtree:num_requests_running") == 0
