"""Per-response speculative fields from each server's shape, normalised to SpecFields."""

from __future__ import annotations

import pytest

from engine_client.responses import cached_tokens, parse_spec_fields


def test_it_reads_the_bundled_engines_spec_block() -> None:
    s = parse_spec_fields({"spec": {"verify_steps": 40, "tau": 2.5, "drafted_tokens": 1280, "accepted_tokens": 60,
                                    "decode_seconds": 0.25}})
    assert (s.source, s.steps, s.tau, s.drafted, s.accepted, s.decode_s) == ("ddtree", 40, 2.5, 1280, 60, 0.25)


def test_it_reads_sglang_meta_info_with_old_and_new_field_names() -> None:
    old = parse_spec_fields({"meta_info": {"spec_verify_ct": 188, "spec_accept_length": 1.0638,
                                           "spec_accept_token_num": 11, "spec_draft_token_num": 940}})
    assert (old.source, old.steps, old.accepted, old.drafted) == ("sglang", 188, 11, 940)
    new = parse_spec_fields({"meta_info": {"spec_verify_ct": 10, "spec_num_correct_drafts": 5,
                                           "spec_num_proposed_drafts": 50, "cached_tokens": 3}})
    assert (new.accepted, new.drafted) == (5, 50)
    assert cached_tokens({"meta_info": {"cached_tokens": 3}}) == 3


def test_it_reads_vllm_per_request_metrics() -> None:
    s = parse_spec_fields({"metrics": {"generation_time_ms": 1500.0, "speculative_decoding": {
        "num_spec_steps": 100, "num_draft_tokens": 500, "num_accepted_draft_tokens": 250,
        "mean_acceptance_length": 3.5}}})
    assert (s.source, s.steps, s.drafted, s.accepted, s.tau) == ("vllm", 100, 500, 250, 3.5)
    assert s.decode_s == pytest.approx(1.5)
    assert cached_tokens({"usage": {"prompt_tokens_details": {"cached_tokens": 7}}}) == 7


def test_it_reads_llamacpp_timings() -> None:
    s = parse_spec_fields({"timings": {"predicted_ms": 250.0, "draft_n": 80, "draft_n_accepted": 30}})
    assert (s.source, s.drafted, s.accepted, s.decode_s) == ("llamacpp", 80, 30, 0.25)


def test_it_returns_none_for_a_plain_openai_answer() -> None:
    assert parse_spec_fields({"choices": [{"text": "x"}], "usage": {}}) is None
    assert cached_tokens({"usage": {"prompt_tokens": 3}}) is None
