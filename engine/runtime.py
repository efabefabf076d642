"""Loading a ready-to-run decoder from model directories, with device and dtype choice."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.checkpoint import load_drafter, load_target
from engine.decode import Decoder
from engine.tokenizer import Tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODELS_DIR = Path(__file__).parent / "models"


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda (got {name!r})")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for, but no CUDA device is available")
    return name


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        # fp32 on CPU keeps the three algorithms bit-identical; bf16 is the GPU's native width.
        return torch.bfloat16 if device == "cuda" else torch.float32
    if name not in DTYPES:
        raise ValueError(f"dtype must be auto or one of {', '.join(DTYPES)} (got {name!r})")
    return DTYPES[name]


def load_decoder(
    model: str | Path,
    draft: str | Path | None,
    *,
    device: str = "auto",
    dtype: str = "auto",
    algorithm: str = "ddtree",
    budget: int = 32,
    block_size: int | None = None,
    draft_window: int | None = None,
    max_context: int | None = None,
    lookup: int = 0,
    lookup_tokens: int | None = None,
) -> Decoder:
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    target = load_target(model, dtype=dt, device=dev)
    drafter = load_drafter(draft, dtype=dt, device=dev) if draft else None
    cfg = target.config
    tokenizer = Tokenizer.load(model, bos_id=cfg.bos_token_id, eos_id=cfg.eos_token_id)
    return Decoder(
        target,
        drafter,
        tokenizer,
        algorithm=algorithm,
        budget=budget,
        block_size=block_size,
        draft_window=draft_window,
        max_context=max_context,
        lookup=lookup,
        lookup_tokens=lookup_tokens,
    )
