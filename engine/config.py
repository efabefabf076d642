"""Model configurations: Qwen3 target and DFlash drafter, in the Hugging Face `config.json` shape.

Field names follow `transformers.Qwen3Config` so that a real Qwen3 checkpoint directory loads
unchanged; the drafter adds the DFlash fields (`block_size`, `num_target_layers`,
`dflash_config: {mask_token_id, target_layer_ids}`). Unknown keys are kept, so a load/save round
trip loses nothing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TargetConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    model_type = "qwen3"
    architecture = "Qwen3ForCausalLM"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TargetConfig:
        raw = dict(raw)
        # transformers >= 5 nests rope_theta in rope_parameters; older files have it flat.
        rope = raw.get("rope_parameters") or {}
        if "rope_theta" not in raw and "rope_theta" in rope:
            raw["rope_theta"] = rope["rope_theta"]
        scaling = raw.get("rope_scaling") or {}
        if scaling and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
            raise ValueError(f"rope_scaling {scaling!r} is not supported (only default RoPE)")
        if raw.get("attention_bias"):
            raise ValueError("attention_bias=true is not supported (Qwen3 has none)")
        if "head_dim" not in raw:
            raw["head_dim"] = raw["hidden_size"] // raw["num_attention_heads"]
        if isinstance(raw.get("eos_token_id"), list):
            raw["eos_token_id"] = raw["eos_token_id"][0]
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: raw.pop(k) for k in list(raw) if k in names}
        return cls(**known, extra=raw)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "extra"}
        out.update(self.extra)
        out.update(
            model_type=self.model_type,
            architectures=[self.architecture],
            hidden_act="silu",
            attention_bias=False,
            attention_dropout=0.0,
            use_sliding_window=False,
            rope_scaling=None,
        )
        out.pop("rope_parameters", None)
        return out

    @classmethod
    def load(cls, directory: str | Path) -> TargetConfig:
        path = Path(directory) / "config.json"
        if not path.exists():
            raise FileNotFoundError(f"no config.json in {directory}: not a model directory")
        return cls.from_dict(json.loads(path.read_text()))

    def save(self, directory: str | Path) -> None:
        path = Path(directory) / "config.json"
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


@dataclass
class DrafterConfig(TargetConfig):
    block_size: int = 16
    num_target_layers: int = 0
    mask_token_id: int = 0
    target_layer_ids: list[int] = field(default_factory=list)

    architecture = "DFlashDraftModel"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DrafterConfig:
        raw = dict(raw)
        dflash = raw.pop("dflash_config", None) or {}
        if "mask_token_id" not in dflash or "target_layer_ids" not in dflash:
            raise ValueError("a DFlash drafter config needs dflash_config.mask_token_id and .target_layer_ids")
        raw["mask_token_id"] = dflash["mask_token_id"]
        raw["target_layer_ids"] = list(dflash["target_layer_ids"])
        return super().from_dict(raw)  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["dflash_config"] = {
            "mask_token_id": out.pop("mask_token_id"),
            "target_layer_ids": out.pop("target_layer_ids"),
        }
        return out


def dflash_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """Target layers whose outputs feed the drafter: spread evenly between layer 1 and L−3 (DFlash)."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    # DFlash spreads them over layers 1..L−3; shallow targets widen that so the ids stay distinct.
    start = 1
    end = min(num_target_layers - 1, max(num_target_layers - 3, start + num_draft_layers - 1))
    span = end - start
    return [int(round(start + i * span / (num_draft_layers - 1))) for i in range(num_draft_layers)]


@dataclass(frozen=True)
class Preset:
    """A named model size for training: target shape, drafter depth, block size, training budget."""

    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    draft_layers: int
    block_size: int
    max_position_embeddings: int
    seq_len: int
    batch_size: int
    target_steps: int
    target_lr: float
    onpolicy_prompts: int
    onpolicy_tokens: int
    draft_steps: int
    draft_lr: float
    anchors_per_seq: int
    corpus_bytes: int | None  # cap on training text (None: the whole standard library)
    dropout: float = 0.0  # residual dropout while pretraining the target
    # Prompt lengths of the on-policy data (the prompts are shared evenly between them); empty: one
    # group at seq_len // 4. A drafter only learns to use context as long as it was trained on.
    onpolicy_contexts: tuple[int, ...] = ()

    def contexts(self) -> tuple[int, ...]:
        return self.onpolicy_contexts or (self.seq_len // 4,)

    def target_config(self, bos: int, eos: int) -> TargetConfig:
        return TargetConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_position_embeddings,
            bos_token_id=bos,
            eos_token_id=eos,
        )

    def drafter_config(
        self,
        target: TargetConfig,
        mask_token_id: int,
        layers: int | None = None,
        target_layer_ids: list[int] | None = None,
    ) -> DrafterConfig:
        """The preset's drafter, or one with `layers` layers reading `target_layer_ids` (default: DFlash's spread)."""
        base = dataclasses.asdict(target)
        base.pop("extra")
        base["num_hidden_layers"] = layers or self.draft_layers
        ids = target_layer_ids or dflash_target_layer_ids(target.num_hidden_layers, base["num_hidden_layers"])
        if len(set(ids)) != len(ids) or not all(0 <= i < target.num_hidden_layers for i in ids):
            raise ValueError(f"target layer ids must be distinct, in 0..{target.num_hidden_layers - 1}: {ids}")
        return DrafterConfig(
            **base,
            block_size=self.block_size,
            num_target_layers=target.num_hidden_layers,
            mask_token_id=mask_token_id,
            target_layer_ids=sorted(ids),
        )


PRESETS: dict[str, Preset] = {
    # CI's model: trains on two CPU cores in minutes, decodes 200 tokens in well under a second.
    "tiny": Preset(
        name="tiny",
        vocab_size=4096,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        draft_layers=2,
        block_size=8,
        max_position_embeddings=4096,
        seq_len=256,
        batch_size=16,
        target_steps=1500,
        target_lr=3e-3,
        onpolicy_prompts=256,
        onpolicy_tokens=128,
        draft_steps=1500,
        draft_lr=2e-3,
        anchors_per_seq=16,
        corpus_bytes=4_000_000,
    ),
    # The demo and benchmark model: trained on one H200 in minutes.
    "small": Preset(
        name="small",
        vocab_size=4096,
        hidden_size=384,
        intermediate_size=1024,
        num_hidden_layers=6,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=64,
        draft_layers=2,
        block_size=16,
        max_position_embeddings=8192,
        seq_len=1024,
        batch_size=64,
        target_steps=3000,
        target_lr=2e-3,
        onpolicy_prompts=4096,
        onpolicy_tokens=384,
        draft_steps=3000,
        draft_lr=1e-3,
        anchors_per_seq=64,
        corpus_bytes=None,
        dropout=0.1,
        onpolicy_contexts=(256, 1024, 3072),
    ),
}
