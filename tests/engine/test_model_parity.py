"""Our Qwen3 must compute the same logits as transformers' on the same weights (fp32)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.checkpoint import load_target, save_model
from engine.config import TargetConfig
from engine.model import Qwen3ForCausalLM
from engine.training.loop import init_weights

transformers = pytest.importorskip("transformers")


def reference_logits(directory: Path, ids: torch.Tensor) -> torch.Tensor:
    model = transformers.Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


def our_logits(directory: Path, ids: torch.Tensor) -> torch.Tensor:
    model = load_target(directory)
    with torch.no_grad():
        hidden, _ = model(ids, torch.arange(ids.shape[1])[None])
        return model.logits(hidden)


def test_it_matches_transformers_on_the_committed_tiny_target(tiny_dirs: tuple[Path, Path]) -> None:
    ids = torch.randint(4, 4096, (1, 97), generator=torch.Generator().manual_seed(0))
    ours, ref = our_logits(tiny_dirs[0], ids), reference_logits(tiny_dirs[0], ids)
    assert (ours - ref).abs().max().item() <= 1e-4


def test_it_matches_transformers_with_an_untied_head_and_sharded_weights(tmp_path: Path) -> None:
    cfg = TargetConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        rope_theta=1e6,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=0,
    )
    torch.manual_seed(1)
    model = Qwen3ForCausalLM(cfg)
    init_weights(model, std=0.2)  # larger weights than a fresh init, so differences would show
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.data.uniform_(0.5, 1.5)
    save_model(model, tmp_path, dtype=torch.float32, shard_bytes=100_000)
    assert (tmp_path / "model.safetensors.index.json").exists()
    ids = torch.randint(0, 300, (2, 40), generator=torch.Generator().manual_seed(2))
    ours, ref = our_logits(tmp_path, ids), reference_logits(tmp_path, ids)
    assert (ours - ref).abs().max().item() <= 1e-4
