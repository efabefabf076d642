"""Sampling values at the edges that the fuzzer found or could find: never a 500 from the model loop."""

from __future__ import annotations

import json

import httpx

BASE = {"prompt": "def add(a, b):", "max_tokens": 6, "ignore_eos": True}


def test_a_vanishing_temperature_decodes_greedily(http: httpx.Client) -> None:
    # 1.17e-38 divided into the logits overflowed them to inf, and sampling failed with a 500.
    tiny = http.post("/v1/completions", json={**BASE, "temperature": 1.175494351e-38, "seed": 1})
    greedy = http.post("/v1/completions", json={**BASE, "temperature": 0})
    assert tiny.status_code == 200, tiny.text
    assert tiny.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]


def test_non_finite_temperatures_and_oversized_seeds_are_refused(http: httpx.Client) -> None:
    for bad, param in (({"temperature": float("nan")}, "temperature"), ({"temperature": float("inf")}, "temperature"),
                       ({"temperature": 0.5, "seed": 2**64}, "seed")):
        r = http.post("/v1/completions", content=json.dumps({**BASE, **bad}))  # json.dumps writes NaN/Infinity
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == param
    generate = http.post("/generate", json={"text": "x", "sampling_params": {"sampling_seed": -1}})
    assert generate.status_code == 400 and "sampling_seed" in generate.json()["error"]["message"]
