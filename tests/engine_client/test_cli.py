"""`python -m engine_client probe URL`: a table or JSON; exit 2 for bad arguments, 1 for an unreachable server."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from engine_client.cli import main
from tests.engine.server.helpers import ROOT, Server

SMALL = ["--contexts", "64", "--outputs", "48", "--n1", "16", "--n2", "40", "--repeats", "1", "--quiet"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_it_prints_a_readable_table(engine: Server) -> None:
    proc = subprocess.run([sys.executable, "-m", "engine_client", "probe", engine.url, *SMALL], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for words in ("Decode throughput", "context", "Output-length sweep", "Streaming check", "τ from counters",
                  "Load before", "clean"):
        assert words in proc.stdout, words


def test_it_prints_json_with_the_report(engine: Server) -> None:
    code, out, err = run("probe", engine.url, *SMALL, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["summary"]["decode_by_context"]["64"]["median"] > 0 and d["acceptance"]["agree"] is True


@pytest.mark.parametrize("argv", [
    ["probe", "not-a-url"], ["probe", "http://127.0.0.1:1", "--contexts", "64,abc"],
    ["probe", "http://127.0.0.1:1", "--repeats", "0"],
    ["probe", "http://127.0.0.1:1", "--api-key-env", "NO_SUCH_VAR_X"],
    ["bogus"],
])
def test_it_exits_2_with_a_message_for_bad_arguments(argv: list[str], capsys) -> None:
    code, _, err = run(*argv)
    assert code == 2
    assert "error" in (err + capsys.readouterr().err)


def test_it_exits_1_with_a_clear_message_when_the_server_is_unreachable() -> None:
    code, _, err = run("probe", "http://127.0.0.1:9", "--quiet", "--connect-timeout", "2")
    assert code == 1 and "127.0.0.1:9" in err and "failed" in err
