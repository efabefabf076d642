"""Bad input gets a 4xx JSON error naming the problem, and the server keeps serving afterwards."""

from __future__ import annotations

import httpx
import pytest

LONG_PROMPT = "x " * 5000  # > 4096 tokens, the tiny model's max context

BAD = [
    ("/v1/completions", b'{"prompt": "x", "max_tokens": ', 400, "JSON"),
    ("/v1/completions", b"[1, 2, 3]", 400, "body"),
    ("/v1/completions", {"prompt": 42}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "many"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10**12}, 400, "max context"),
    ("/v1/completions", {"prompt": LONG_PROMPT, "max_tokens": 4}, 400, "limit is 4095"),
    ("/v1/completions", {"prompt": "x", "model": "no-such-model"}, 404, "not found"),
    ("/v1/completions", {"prompt": "x", "stop": [""]}, 400, "stop"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "role"),
    ("/v1/chat/completions", {"model": "other", "messages": [{"role": "user", "content": "x"}]}, 404, "not found"),
    ("/generate", {"sampling_params": {"max_new_tokens": 4}}, 400, "text or input_ids"),
    ("/generate", {"input_ids": [1, 10**9]}, 400, "token ids"),
    ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 0}}, 400, "max_new_tokens"),
    ("/generate", {"text": LONG_PROMPT}, 400, "max context"),
    ("/tokenize", {"prompt": 3}, 400, "prompt"),
]


@pytest.mark.parametrize(("path", "body", "status", "needle"), BAD)
def test_it_rejects_bad_input_with_a_json_message(http: httpx.Client, path: str, body: object, status: int,
                                                  needle: str) -> None:
    if isinstance(body, bytes):
        r = http.post(path, content=body, headers={"content-type": "application/json"})
    else:
        r = http.post(path, json=body)
    assert r.status_code == status, r.text
    message = r.json()["error"]["message"]
    assert needle.lower() in message.lower()


def test_it_keeps_serving_after_a_burst_of_bad_requests(http: httpx.Client) -> None:
    for path, body, _, _ in BAD * 3:
        r = http.post(path, content=body) if isinstance(body, bytes) else http.post(path, json=body)
        assert 400 <= r.status_code < 500
    r = http.post("/v1/completions", json={"prompt": "for i in range(3):\n", "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] > 0
    assert http.get("/health").status_code == 200
