"""Dialect detection and fingerprints: bundled engine (real), SGLang, vLLM and llama.cpp (mock transports)."""

from __future__ import annotations

import httpx

from engine_client import EngineClient


def routes(table: dict[str, object]):
    def handler(request: httpx.Request) -> httpx.Response:
        body = table.get(request.url.path)
        return httpx.Response(404, json={"detail": "Not Found"}) if body is None else httpx.Response(200, json=body)

    return handler


def test_it_fingerprints_the_real_bundled_engine(client: EngineClient) -> None:
    fp = client.fingerprint()
    assert client.dialect == "ddtree" and fp["kind"] == "ddtree"
    assert fp["model"]["name"] == "tiny" and len(fp["model"]["sha256"]) == 64
    assert fp["speculative"]["algorithm"] == "ddtree" and fp["speculative"]["budget"] > 0
    assert fp["max_context"] == 4096 and fp["version"]
    assert client.fingerprint()["hash"] == fp["hash"]  # stable across calls


def test_it_detects_sglang_and_reads_its_speculative_config(mock_client) -> None:
    info = {"version": "0.5.9", "model_path": "org/model-8b", "context_length": 32768,
            "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "internal_states": [{"x": 1}]}
    c = mock_client(routes({"/get_server_info": info}))
    fp = c.fingerprint()
    assert (fp["kind"], fp["version"], fp["model"], fp["max_context"]) == ("sglang", "0.5.9", "org/model-8b", 32768)
    assert fp["speculative"] == {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}


def test_it_detects_vllm_from_version_and_models(mock_client) -> None:
    c = mock_client(routes({"/version": {"version": "0.11.2"},
                            "/v1/models": {"data": [{"id": "org/model-8b", "max_model_len": 8192}]}}))
    fp = c.fingerprint()
    assert (fp["kind"], fp["version"], fp["model"], fp["max_context"]) == ("vllm", "0.11.2", "org/model-8b", 8192)


def test_it_detects_llamacpp_from_props(mock_client) -> None:
    props = {"build_info": "b6000-abc", "model_path": "/m/model.gguf",
             "default_generation_settings": {"n_ctx": 4096, "params": {"speculative.n_max": 16}}}
    fp = mock_client(routes({"/props": props})).fingerprint()
    assert (fp["kind"], fp["version"], fp["max_context"]) == ("llamacpp", "b6000-abc", 4096)
    assert fp["speculative"] == {"speculative.n_max": 16}


def test_it_changes_the_hash_when_the_deployment_changes(mock_client) -> None:
    a = mock_client(routes({"/version": {"version": "0.11.2"}, "/v1/models": {"data": [{"id": "m"}]}})).fingerprint()
    b = mock_client(routes({"/version": {"version": "0.11.3"}, "/v1/models": {"data": [{"id": "m"}]}})).fingerprint()
    assert a["hash"] != b["hash"]
