"""Load and save model directories in the Hugging Face / DFlash formats (DESIGN §7.1).

Target: config.json (Qwen3Config fields), model.safetensors (standard Qwen3 names), tokenizer.json.
Drafter: config.json (+ block_size, num_target_layers, dflash_config), model.safetensors with
`fc.weight`, `hidden_norm.weight`, `layers.N.*`, `norm.weight`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from engine.config import DrafterConfig, TargetConfig
from engine.drafter import DFlashDrafter
from engine.model import Qwen3ForCausalLM

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
SHARD_BYTES = 10_000_000  # keeps each committed file small; HF's sharded layout, so real checkpoints load too


def _state_to_save(module: nn.Module, tied: bool) -> dict[str, torch.Tensor]:
    state = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
    if tied:
        state.pop("lm_head.weight", None)  # a tied head is the embedding; HF files omit it
    return state


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a model directory: one file, or the shards its index names."""
    if (directory / INDEX).exists():
        index = json.loads((directory / INDEX).read_text())
        return [directory / name for name in sorted(set(index["weight_map"].values()))]
    if (directory / WEIGHTS).exists():
        return [directory / WEIGHTS]
    raise FileNotFoundError(f"no {WEIGHTS} or {INDEX} in {directory}")


def _load_into(module: nn.Module, directory: Path, tied: bool) -> None:
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(directory):
        state.update(load_file(str(path)))
    expected = set(module.state_dict())
    if tied:
        expected.discard("lm_head.weight")
        state.pop("lm_head.weight", None)
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ValueError(
            f"{directory}: weights do not match the config: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    module.load_state_dict(state, strict=False)


def load_target(
    directory: str | Path, *, dtype: torch.dtype = torch.float32, device: str = "cpu", max_positions: int | None = None
) -> Qwen3ForCausalLM:
    directory = Path(directory)
    cfg = TargetConfig.load(directory)
    model = Qwen3ForCausalLM(cfg, max_positions)
    _load_into(model, directory, cfg.tie_word_embeddings)
    return model.to(device=device, dtype=dtype).eval()


def load_drafter(
    directory: str | Path, *, dtype: torch.dtype = torch.float32, device: str = "cpu", max_positions: int | None = None
) -> DFlashDrafter:
    directory = Path(directory)
    cfg = DrafterConfig.load(directory)
    model = DFlashDrafter(cfg, max_positions)
    _load_into(model, directory, tied=False)
    return model.to(device=device, dtype=dtype).eval()


def save_model(
    model: Qwen3ForCausalLM | DFlashDrafter,
    directory: str | Path,
    dtype: torch.dtype = torch.bfloat16,
    shard_bytes: int = SHARD_BYTES,
) -> None:
    """Write config.json and the weights (cast to `dtype`), sharded with an index past `shard_bytes`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("model*.safetensors*"):
        old.unlink()
    model.config.save(directory)
    tied = isinstance(model, Qwen3ForCausalLM) and model.config.tie_word_embeddings
    state = {k: v.to(dtype) for k, v in _state_to_save(model, tied).items()}
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    if len(shards) == 1:
        save_file(state, str(directory / WEIGHTS), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def weights_hash(directory: str | Path) -> str:
    """sha256 over the weight files in order: identifies the exact weights a server runs."""
    digest = hashlib.sha256()
    for path in weight_files(Path(directory)):
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
