"""Server settings: one dataclass, filled from command-line flags whose defaults come from the environment.

Every flag `--some-flag` has the twin variable `ENGINE_SOME_FLAG` (see `FLAGS`); the command line
wins over the environment, which wins over the built-in default. A bad environment value stops the
command with a message naming the variable, as a bad flag would.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Imported lazily elsewhere; this module must not pull torch so the socket comes up before the weights.
MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
ALGORITHMS = ("ar", "dflash", "ddtree")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ServerConfig:
    model: str = str(MODELS_DIR / "small" / "target")
    draft: str | None = str(MODELS_DIR / "small" / "draft")
    served_model_name: str | None = None  # None: derived from the model directory (see `model_name`)
    algorithm: str = "ddtree"
    budget: int = 32
    lookup: int = 0  # ddtree's context-lookup branch: n-gram order, 0 for none (engine/tree.py)
    lookup_tokens: int | None = None  # its length (None: the engine's default, 31)
    block_size: int | None = None
    draft_window_size: int | None = None
    max_context: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    host: str = "127.0.0.1"
    port: int = 30000
    max_queue_length: int = 64  # requests waiting behind the running one; more → 503
    load_delay: float = 0.0  # seconds to wait before loading: lets tests and demos see /health at 503
    log_level: str = "info"

    @property
    def model_name(self) -> str:
        """The id clients pass as `model`: the flag, else the directory name (its parent's for `…/target`)."""
        if self.served_model_name:
            return self.served_model_name
        path = Path(self.model).resolve()
        return path.parent.name if path.name == "target" and path.parent.name else path.name

    @property
    def draft_name(self) -> str | None:
        if not self.draft:
            return None
        path = Path(self.draft).resolve()
        return f"{path.parent.name}/{path.name}" if path.name == "draft" else path.name


def _int(text: str) -> int:
    return int(text)


def _opt_int(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none", "auto") else int(text)


def _opt_str(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none") else text


# flag, field, parser of the text, help. The environment variable is ENGINE_ + the flag in capitals.
FLAGS: list[tuple[str, str, Callable[[str], Any], str]] = [
    ("--model", "model", str, "target model directory"),
    ("--draft", "draft", _opt_str, "drafter directory ('none' for algorithm ar without a drafter)"),
    ("--served-model-name", "served_model_name", _opt_str, "the model id clients use (default: from --model)"),
    ("--algorithm", "algorithm", str, "ddtree | dflash | ar"),
    ("--budget", "budget", _int, "ddtree: drafted tree nodes per round"),
    ("--lookup", "lookup", _int, "ddtree: n-gram order of the context-lookup branch (0: none)"),
    ("--lookup-tokens", "lookup_tokens", _opt_int, "ddtree: the lookup branch's length, 1..63 (default 31)"),
    ("--block-size", "block_size", _opt_int, "drafted block length (default: the drafter's)"),
    ("--draft-window-size", "draft_window_size", _opt_int, "drafter context window in tokens (default: all)"),
    ("--max-context", "max_context", _opt_int, "prompt + completion limit in tokens (default: the model's)"),
    ("--device", "device", str, "auto | cpu | cuda"),
    ("--dtype", "dtype", str, "auto | float32 | bfloat16 | float16"),
    ("--host", "host", str, "address to listen on"),
    ("--port", "port", _int, "port to listen on"),
    ("--max-queue-length", "max_queue_length", _int, "requests allowed to wait; beyond it → 503 + Retry-After"),
    ("--load-delay", "load_delay", float, "seconds to wait before loading the model (tests, demos)"),
    ("--log-level", "log_level", str, "uvicorn log level"),
]
CHOICES = {"algorithm": ALGORITHMS, "device": DEVICES, "dtype": DTYPES,
           "log_level": ("critical", "error", "warning", "info", "debug", "trace")}


def env_name(flag: str) -> str:
    return "ENGINE_" + flag.lstrip("-").replace("-", "_").upper()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags with `None` defaults, so `config_from_args` can tell a given flag from an absent one."""
    defaults = ServerConfig()
    for flag, field_name, parse, help_text in FLAGS:
        parser.add_argument(flag, dest=field_name, type=parse, default=None, choices=CHOICES.get(field_name),
                            help=f"{help_text} [env {env_name(flag)}; default {getattr(defaults, field_name)}]")


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Flag, else environment variable, else default. Raises ValueError naming a bad variable."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for flag, field_name, parse, _ in FLAGS:
        given = getattr(args, field_name, None)
        if given is not None:
            values[field_name] = given
            continue
        var = env_name(flag)
        if var not in environ:
            continue
        try:
            value = parse(environ[var])
        except ValueError:
            raise ValueError(f"{var}={environ[var]!r} is not a valid value for {flag}") from None
        choices = CHOICES.get(field_name)
        if choices is not None and value not in choices:
            raise ValueError(f"{var}={environ[var]!r}: choose one of {', '.join(choices)}")
        values[field_name] = value
    config = ServerConfig(**values)
    check(config)
    return config


def check(config: ServerConfig) -> None:
    """Mistakes worth refusing before the socket opens."""
    if not Path(config.model).is_dir():
        raise ValueError(f"model directory {config.model} does not exist")
    if config.draft and not Path(config.draft).is_dir():
        raise ValueError(f"draft directory {config.draft} does not exist")
    if config.max_queue_length < 0:
        raise ValueError(f"max queue length must be >= 0 (got {config.max_queue_length})")
    if not 0 <= config.port <= 65535:
        raise ValueError(f"port must be in 0..65535 (got {config.port})")
    if config.load_delay < 0:
        raise ValueError(f"load delay must be >= 0 (got {config.load_delay})")
