from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from engine.checkpoint import load_drafter, load_target, save_model, weights_hash
from engine.config import DrafterConfig


def test_it_round_trips_the_drafter_in_the_dflash_layout(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    drafter = load_drafter(tiny_dirs[1])
    raw = json.loads((tiny_dirs[1] / "config.json").read_text())
    assert {"block_size", "num_target_layers", "dflash_config"} <= set(raw)
    assert set(raw["dflash_config"]) == {"mask_token_id", "target_layer_ids"}
    names = set(drafter.state_dict())
    assert {"fc.weight", "hidden_norm.weight", "norm.weight"} <= names
    assert not any("embed" in n or "lm_head" in n for n in names)  # borrowed from the target
    save_model(drafter, tmp_path, dtype=torch.float32)
    again = load_drafter(tmp_path)
    assert again.config == drafter.config
    for k, v in drafter.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])


def test_it_loads_sharded_weights_identically(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    target = load_target(tiny_dirs[0])
    save_model(target, tmp_path, dtype=torch.bfloat16, shard_bytes=400_000)
    shards = sorted(p.name for p in tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 2 and (tmp_path / "model.safetensors.index.json").exists()
    again = load_target(tmp_path)
    for k, v in target.state_dict().items():
        assert torch.equal(v, again.state_dict()[k]), k  # the committed weights are bf16 already
    assert "lm_head.weight" not in json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]


def test_it_hashes_weights_stably(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dirs[0], copy)
    assert weights_hash(copy) == weights_hash(tiny_dirs[0])
    assert len(weights_hash(copy)) == 64


def test_it_says_which_weights_are_missing(tiny_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    drafter = load_drafter(tiny_dirs[1])
    state = {k: v for k, v in drafter.state_dict().items() if k != "fc.weight"}
    from safetensors.torch import save_file

    drafter.config.save(tmp_path)
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="fc.weight"):
        load_drafter(tmp_path)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_target(tmp_path / "nowhere")


def test_it_needs_the_dflash_fields_in_a_drafter_config() -> None:
    with pytest.raises(ValueError, match="dflash_config"):
        DrafterConfig.from_dict(
            {
                "vocab_size": 10,
                "hidden_size": 8,
                "intermediate_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 1,
                "num_key_value_heads": 1,
            }
        )
