"""/server_info, /tokenize and the OpenAPI document describe the running engine."""

from __future__ import annotations

import re

import httpx


def test_it_reports_version_models_hashes_and_settings(http: httpx.Client) -> None:
    info = http.get("/server_info").json()
    assert info["version"] and info["status"] == "ready"
    assert "git_revision" in info
    assert info["model"]["name"] == "tiny" and re.fullmatch(r"[0-9a-f]{64}", info["model"]["sha256"])
    assert re.fullmatch(r"[0-9a-f]{64}", info["draft"]["sha256"])
    assert info["algorithm"] == "ddtree" and info["budget"] == 32 and info["block_size"] >= 2 and info["lookup"] == 0
    assert info["lookup_tokens"] is None  # no branch, so no length
    assert info["dtype"] == "float32" and info["device"] == "cpu" and info["max_context"] == 4096
    assert "draft_window" in info and "page_size" in info


def test_it_tokenizes_with_the_model_tokenizer(http: httpx.Client) -> None:
    with_bos = http.post("/tokenize", json={"prompt": "print('hi')"}).json()
    without = http.post("/tokenize", json={"prompt": "print('hi')", "add_special_tokens": False}).json()
    assert with_bos["count"] == len(with_bos["tokens"]) == len(without["tokens"]) + 1
    assert with_bos["max_model_len"] == 4096


def test_it_publishes_an_openapi_document(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/health", "/v1/models", "/v1/completions", "/v1/chat/completions", "/generate", "/tokenize",
                 "/server_info", "/metrics"):
        assert path in paths
