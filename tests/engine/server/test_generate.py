"""SGLang-style /generate: exact lengths with ignore_eos, and the per-request speculative meta_info."""

from __future__ import annotations

import httpx


def test_it_returns_exactly_max_new_tokens_with_ignore_eos(http: httpx.Client) -> None:
    r = http.post("/generate", json={"text": "class Stack:\n", "sampling_params": {
        "max_new_tokens": 57, "ignore_eos": True, "temperature": 0}})
    assert r.status_code == 200, r.text
    body = r.json()
    meta = body["meta_info"]
    assert meta["completion_tokens"] == 57 == len(body["output_ids"])
    assert meta["finish_reason"] == {"type": "length", "length": 57}
    assert meta["spec_verify_ct"] >= 1
    assert sum(meta["spec_accept_histogram"]) == meta["spec_verify_ct"]
    assert meta["spec_accept_length"] >= 1.0
    assert 0 < meta["decode_time_s"] <= meta["e2e_time_s"]
    assert meta["prompt_tokens"] > 0


def test_it_accepts_input_ids_and_matches_text_at_temperature_zero(http: httpx.Client) -> None:
    ids = http.post("/tokenize", json={"prompt": "import os\n"}).json()["tokens"]
    params = {"max_new_tokens": 20, "temperature": 0, "ignore_eos": True}
    by_ids = http.post("/generate", json={"input_ids": ids, "sampling_params": params}).json()
    by_text = http.post("/generate", json={"text": "import os\n", "sampling_params": params}).json()
    assert by_ids["output_ids"] == by_text["output_ids"]
    assert by_ids["meta_info"]["prompt_tokens"] == len(ids)
