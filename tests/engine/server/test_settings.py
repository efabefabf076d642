"""Every serve flag has an ENGINE_* environment twin; the flag wins; bad values name the variable."""

from __future__ import annotations

import argparse

import pytest

from engine.server.config import FLAGS, add_arguments, config_from_args, env_name

TINY = "engine/models/tiny"


def parse(argv: list[str], env: dict[str, str]):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(argv), env)


def test_it_reads_settings_from_the_environment() -> None:
    c = parse([], {"ENGINE_MODEL": f"{TINY}/target", "ENGINE_DRAFT": f"{TINY}/draft", "ENGINE_ALGORITHM": "dflash",
                   "ENGINE_BUDGET": "8", "ENGINE_BLOCK_SIZE": "4", "ENGINE_DRAFT_WINDOW_SIZE": "256",
                   "ENGINE_MAX_CONTEXT": "1024", "ENGINE_DEVICE": "cpu", "ENGINE_DTYPE": "float32",
                   "ENGINE_HOST": "0.0.0.0", "ENGINE_PORT": "31000", "ENGINE_MAX_QUEUE_LENGTH": "3"})
    assert (c.algorithm, c.budget, c.block_size, c.draft_window_size, c.max_context) == ("dflash", 8, 4, 256, 1024)
    assert (c.device, c.dtype, c.host, c.port, c.max_queue_length) == ("cpu", "float32", "0.0.0.0", 31000, 3)
    assert c.model_name == "tiny"


def test_it_lets_the_flag_win_over_the_environment() -> None:
    c = parse(["--model", f"{TINY}/target", "--budget", "5", "--port", "31001", "--lookup", "3"],
              {"ENGINE_BUDGET": "64", "ENGINE_PORT": "9", "ENGINE_LOOKUP": "2"})
    assert (c.budget, c.port, c.lookup) == (5, 31001, 3)
    assert parse(["--model", f"{TINY}/target"], {"ENGINE_LOOKUP": "2"}).lookup == 2
    assert parse(["--model", f"{TINY}/target"], {}).lookup_tokens is None  # the engine's default
    c = parse(["--model", f"{TINY}/target", "--lookup-tokens", "20"], {"ENGINE_LOOKUP_TOKENS": "9"})
    assert c.lookup_tokens == 20 and parse([], {"ENGINE_LOOKUP_TOKENS": "9"}).lookup_tokens == 9


def test_it_names_the_variable_of_a_bad_value() -> None:
    with pytest.raises(ValueError, match="ENGINE_BUDGET"):
        parse(["--model", f"{TINY}/target"], {"ENGINE_BUDGET": "lots"})
    with pytest.raises(ValueError, match="ENGINE_ALGORITHM"):
        parse(["--model", f"{TINY}/target"], {"ENGINE_ALGORITHM": "magic"})


def test_it_gives_every_flag_a_twin() -> None:
    assert {env_name(flag) for flag, *_ in FLAGS} >= {
        "ENGINE_MODEL", "ENGINE_DRAFT", "ENGINE_ALGORITHM", "ENGINE_BUDGET", "ENGINE_BLOCK_SIZE",
        "ENGINE_DRAFT_WINDOW_SIZE", "ENGINE_MAX_CONTEXT", "ENGINE_DEVICE", "ENGINE_DTYPE", "ENGINE_HOST",
        "ENGINE_PORT", "ENGINE_MAX_QUEUE_LENGTH"}
