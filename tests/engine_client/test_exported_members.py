from __future__ import annotations

import engine_client

EXPECTED = {
    "CANARY_TEXT", "CANARY_VERSION", "Completion", "ConnectError", "ConnectTimeout", "DeadlineExceeded", "EngineClient",
    "EngineClientError", "Measurement", "ProbePlan", "ProbeReport", "Prompt", "PromptBuilder", "ProtocolError",
    "ReadTimeout", "SSEDecoder", "ServerSentEvent", "Snapshot", "SpecFields", "StatusError", "StreamChunk",
    "TimeoutError", "Window", "parse_metrics", "run_probe", "window",
}


def test_it_exports_exactly_the_pinned_public_surface() -> None:
    assert set(engine_client.__all__) == EXPECTED
    for name in engine_client.__all__:
        assert hasattr(engine_client, name), name


def test_it_imports_nothing_from_django() -> None:
    import sys

    assert not any(m == "django" or m.startswith("django.") for m in sys.modules if "engine_client" in m)
    src = "\n".join(p.read_text() for p in __import__("pathlib").Path(engine_client.__file__).parent.glob("*.py"))
    assert "import django" not in src and "from django" not in src
