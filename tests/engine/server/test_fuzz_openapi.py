"""The engine under a fuzzer: requests generated from its own OpenAPI document (FastAPI's /openapi.json)
by schemathesis, valid and invalid ones alike, never get a 5xx; afterwards a normal request still succeeds.

Examples are few and derandomized (the same ones every run), and the engine under test has a 256-token
context, so no generated request can ask for minutes of generation: quick and stable on a loaded machine.
Raise FUZZ_EXAMPLES locally for a deeper search."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode

from tests.engine.server.helpers import Server, start_server, stop_server

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))  # per operation and mode


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Server]:
    s = start_server("--max-context", "256")
    yield s
    stop_server(s)


# schemathesis' own pytest integration (`from_fixture`) does not run under pytest 9, so each operation's
# strategy is driven by Hypothesis directly: the same generation, the same check.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_it_never_answers_a_generated_request_with_a_server_error(fuzzed: Server, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_url(fuzzed.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {"POST /v1/completions", "POST /generate"}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not operation.body:
            continue  # nothing to get wrong in a GET without parameters

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def no_server_error(case: Any) -> None:
            case.call_and_validate(base_url=fuzzed.url, checks=[not_a_server_error], timeout=120)

        no_server_error()


def test_it_still_answers_a_normal_request_after_the_fuzzer(fuzzed: Server) -> None:
    # Runs after the generated requests above (pytest keeps a module's order).
    with fuzzed.client() as http:
        assert http.get("/health").status_code == 200
        r = http.post("/v1/completions", json={"prompt": "def add(a, b):", "max_tokens": 8, "temperature": 0,
                                               "ignore_eos": True})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 8
