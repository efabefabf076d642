"""/metrics parses with prometheus_client, and counter deltas over requests equal their meta_info."""

from __future__ import annotations

import httpx

from tests.engine.server.helpers import sample, scrape

COUNTERS = ("ddtree:prompt_tokens_total", "ddtree:generation_tokens_total", "ddtree:spec_decode_num_drafts_total",
            "ddtree:spec_decode_num_draft_tokens_total", "ddtree:spec_decode_num_accepted_tokens_total")


def generate(http: httpx.Client, text: str, n: int) -> dict:
    r = http.post("/generate", json={"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}})
    assert r.status_code == 200, r.text
    return r.json()["meta_info"]


def test_it_exposes_the_design_names_with_model_and_algorithm_labels(http: httpx.Client) -> None:
    generate(http, "x = 1\n", 8)
    samples = scrape(http)
    names = {name for name, _ in samples}
    for name in (*COUNTERS, "ddtree:requests_total", "ddtree:spec_decode_num_accepted_tokens_per_pos_total",
                 "ddtree:num_requests_running", "ddtree:num_requests_waiting", "ddtree:kv_cache_usage_perc",
                 "ddtree:spec_accept_length", "ddtree:spec_accept_length_per_round_count",
                 "ddtree:time_to_first_token_seconds_count", "ddtree:inter_token_latency_seconds_count",
                 "ddtree:e2e_request_latency_seconds_count", "ddtree:round_stage_seconds_count"):
        assert name in names, name
    for _, labels in samples:
        assert ("model_name", "tiny") in labels and ("algorithm", "ddtree") in labels
    stages = {dict(labels)["stage"] for name, labels in samples if name == "ddtree:round_stage_seconds_count"}
    assert stages == {"draft", "tree_build", "verify", "commit"}


def test_it_counts_exactly_what_one_request_reports(http: httpx.Client) -> None:
    before = scrape(http)
    meta = generate(http, "def main():\n", 33)
    after = scrape(http)

    def delta(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert delta("ddtree:spec_decode_num_drafts_total") == meta["spec_verify_ct"]
    assert delta("ddtree:generation_tokens_total") == meta["completion_tokens"]
    assert delta("ddtree:prompt_tokens_total") == meta["prompt_tokens"]
    assert delta("ddtree:spec_decode_num_draft_tokens_total") == meta["spec_draft_tokens"]
    assert delta("ddtree:spec_decode_num_accepted_tokens_total") == meta["spec_accepted_tokens"]
    assert delta("ddtree:spec_accept_length_per_round_count") == meta["spec_verify_ct"]
    assert delta("ddtree:requests_total", finished_reason=meta["finish_reason"]["type"]) == 1
    assert delta("ddtree:e2e_request_latency_seconds_count") == 1


def test_it_sums_counters_over_several_requests(http: httpx.Client) -> None:
    before = scrape(http)
    metas = [generate(http, f"value_{i} = ", n) for i, n in enumerate((5, 17, 40))]
    after = scrape(http)
    drafts, tokens = (sample(after, name) - sample(before, name)
                      for name in ("ddtree:spec_decode_num_drafts_total", "ddtree:generation_tokens_total"))
    assert drafts == sum(m["spec_verify_ct"] for m in metas)
    assert tokens == sum(m["completion_tokens"] for m in metas)
