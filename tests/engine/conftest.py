from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.decode import Decoder
from engine.runtime import MODELS_DIR, load_decoder
from engine.training.corpus import load_heldout, prompts_from

TINY = MODELS_DIR / "tiny"


@pytest.fixture(scope="session")
def tiny_dirs() -> tuple[Path, Path]:
    return TINY / "target", TINY / "draft"


@pytest.fixture(scope="session")
def decoder(tiny_dirs: tuple[Path, Path]) -> Decoder:
    torch.manual_seed(0)
    return load_decoder(*tiny_dirs, device="cpu", dtype="float32", budget=16, max_context=1024)


@pytest.fixture(scope="session")
def prompts() -> list[str]:
    """24 held-out code prompts (the test machine's own standard library)."""
    found = prompts_from(load_heldout(), 24, 300)
    assert len(found) >= 20, "the held-out stdlib modules gave too few prompts"
    return found
