"""The training corpus: the Python standard library of the interpreter that runs the training.

Nothing is downloaded and no third-party text is committed: every machine with CPython has the
corpus. Test suites are left out (large, repetitive, unlike code people write). A fixed list of
modules is held out for evaluation prompts.
"""

from __future__ import annotations

import platform
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}

# Held out of training; prompts for evaluation and benchmarks come from these.
HELDOUT = (
    "bisect.py",
    "colorsys.py",
    "fractions.py",
    "graphlib.py",
    "heapq.py",
    "queue.py",
    "sched.py",
    "shlex.py",
    "statistics.py",
    "textwrap.py",
    "json/decoder.py",
    "json/encoder.py",
)


@dataclass
class Corpus:
    train: list[str]
    heldout: dict[str, str]
    python_version: str

    @property
    def train_bytes(self) -> int:
        return sum(len(t.encode()) for t in self.train)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def load_corpus(max_bytes: int | None = None) -> Corpus:
    """Every stdlib *.py, held-out modules apart; with `max_bytes`, a fixed random subset of files."""
    root = stdlib_root()
    train: list[str] = []
    heldout: dict[str, str] = {}
    total = 0
    paths = sorted(root.rglob("*.py"))
    random.Random(0).shuffle(paths)  # a capped corpus samples the whole library, not its first letters
    for path in paths:
        rel = path.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if rel.as_posix() in HELDOUT:
            heldout[rel.as_posix()] = text
        elif max_bytes is None or total < max_bytes:
            train.append(text)
            total += len(text.encode())
    if not train:
        raise RuntimeError(f"no Python sources found under {root}")
    return Corpus(train, heldout, platform.python_version())


def load_heldout() -> dict[str, str]:
    """Just the held-out modules (what benchmarks prompt with)."""
    root = stdlib_root()
    return {name: (root / name).read_text(encoding="utf-8") for name in HELDOUT if (root / name).exists()}


def prompts_from(texts: dict[str, str], count: int, chars: int = 400) -> list[str]:
    """Deterministic code prompts: text ending just after a `def` line, ~`chars` long.

    A prompt that ends at a function header asks for its body: the continuation a code model
    (and its drafter) should find most predictable.
    """
    prompts: list[str] = []
    per_file = max(1, -(-count // max(1, len(texts))))
    for name in sorted(texts):
        lines = texts[name].splitlines(keepends=True)
        offsets = [
            i for i, line in enumerate(lines) if line.lstrip().startswith("def ") and line.rstrip().endswith(":")
        ]
        taken = 0
        for i in offsets[1::2]:
            body = "".join(lines[: i + 1])
            if len(body) < chars:
                continue
            prompts.append(body[-chars:])
            taken += 1
            if taken == per_file:
                break
    return prompts[:count]
