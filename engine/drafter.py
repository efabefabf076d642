"""DFlash block-diffusion drafter (Chen, Liang & Liu, "DFlash", arXiv 2602.06036).

The drafter predicts a whole block of future tokens in one forward pass. Its input is the target's
embedding of the block `[b, MASK, …, MASK]` (b = the bonus token the target already chose); its
context is the target's own hidden states from a few chosen layers, concatenated, projected by
`fc` and normalised by `hidden_norm`, and injected as extra keys/values into every drafter layer.
Queries come only from the block; the block attends to itself bidirectionally and to all context.
It has no embedding and no LM head: it borrows the target's, frozen.

Parameter names follow the DFlash checkpoint layout (`fc`, `hidden_norm`, `layers.N.*`, `norm`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from engine.config import DrafterConfig
from engine.kv_cache import KVCache
from engine.model import DecoderLayer, RMSNorm, RotaryTable


class DFlashDrafter(nn.Module):
    def __init__(self, cfg: DrafterConfig, max_positions: int | None = None) -> None:
        super().__init__()
        self.config = cfg
        width = len(cfg.target_layer_ids) * cfg.hidden_size
        self.fc = nn.Linear(width, cfg.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = RotaryTable(cfg.head_dim, cfg.rope_theta, max_positions or cfg.max_position_embeddings)

    def project(self, target_hidden: list[Tensor]) -> Tensor:
        """Captured target layer outputs (each [N, C, H]) → injected context [N, C, H]."""
        return self.hidden_norm(self.fc(torch.cat(target_hidden, dim=-1)))

    def forward(
        self,
        block_emb: Tensor,
        block_pos: Tensor,
        context: Tensor,
        context_pos: Tensor,
        *,
        cache: KVCache | None = None,
        cache_len: int = 0,
        mask: Tensor | None = None,
    ) -> Tensor:
        """Return normed hidden states of the block, [N, Q, H].

        block_emb: [N, Q, H] target embeddings of [b, MASK…]; block_pos: [N, Q].
        context: [N, C, H] projected features (`project`); context_pos: [N, C].
        With `cache` (inference), the new context K/V are appended at rows [cache_len, cache_len+C)
        and the block attends to every cached row (within the cache's window) plus itself.
        Without it (training), `mask` (bool [N, Q, C+Q]) says which context and block rows each
        query sees.
        """
        dtype = block_emb.dtype
        q_cos, q_sin = self.rotary(block_pos, dtype)
        c_cos, c_sin = self.rotary(context_pos, dtype)
        h = block_emb
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.query(x, q_cos, q_sin)
            k_blk, v_blk = attn.key_value(x, q_cos, q_sin)
            # The context is the same projected feature for every layer; each layer has its own k/v.
            k_ctx, v_ctx = attn.key_value(context, c_cos, c_sin)
            if cache is not None:
                k_ctx, v_ctx = cache.write(i, cache_len, k_ctx, v_ctx)
            k = torch.cat([k_ctx, k_blk], dim=1)
            v = torch.cat([v_ctx, v_blk], dim=1)
            h = h + attn.attend(q, k, v, mask, causal=False)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.norm(h)
