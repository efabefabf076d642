"""Qwen3 decoder-only transformer, written for speculative decoding.

The architecture of Qwen3 (Qwen team, "Qwen3 Technical Report", 2025; reference implementation
`transformers/models/qwen3/modeling_qwen3.py`): RMSNorm, grouped-query attention with per-head
RMSNorm on q and k, rotary position embeddings (rotate-half form), SwiGLU MLP, tied or untied LM
head. Parameter names are the Hugging Face ones, so a real checkpoint loads unchanged.

Unlike the reference, one forward takes explicit per-token positions and an optional boolean
attention mask, so the same call runs prefill (causal), plain decoding (one token) and tree
verification (1 + B tokens at depth positions under an ancestor-only mask). It can also return
the hidden states of chosen layers, which feed the DFlash drafter.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.config import TargetConfig
from engine.kv_cache import KVCache


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in fp32 like the reference, so bf16 weights give the reference's numbers.
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


class RotaryTable(nn.Module):
    """cos/sin for every position below `size`, looked up by explicit position ids."""

    def __init__(self, head_dim: int, theta: float, max_positions: int) -> None:
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.register_buffer("cos", torch.empty(0), persistent=False)
        self.register_buffer("sin", torch.empty(0), persistent=False)
        self.ensure(max_positions)

    @property
    def size(self) -> int:
        return self.cos.shape[0]

    def ensure(self, positions: int) -> None:
        """Make the table cover positions 0..positions−1 (a long context plus a tree's depth)."""
        if positions <= self.size:
            return
        device = self.cos.device
        hd = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.int64, device=device).float() / hd))
        freqs = torch.outer(torch.arange(positions, dtype=torch.float32, device=device), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)  # [P, hd]
        self.cos, self.sin = emb.cos(), emb.sin()

    def forward(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        return self.cos[positions].to(dtype), self.sin[positions].to(dtype)  # [N, T, hd] each


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: [N, T, heads, hd]; cos/sin: [N, T, hd]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.unsqueeze(2) + rotated * sin.unsqueeze(2)


class Attention(nn.Module):
    """Projections and q/k norms shared by the target and the drafter; they differ in what they attend to."""

    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        hd = cfg.head_dim
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, hd
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv * hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv * hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * hd, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)

    def query(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        n, t, _ = x.shape
        return apply_rotary(self.q_norm(self.q_proj(x).view(n, t, self.n_heads, self.head_dim)), cos, sin)

    def key_value(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        n, t, _ = x.shape
        k = apply_rotary(self.k_norm(self.k_proj(x).view(n, t, self.n_kv, self.head_dim)), cos, sin)
        return k, self.v_proj(x).view(n, t, self.n_kv, self.head_dim)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        """q: [N, T, H, hd]; k, v: [N, S, KV, hd]; mask: bool [T, S] or [N, T, S], True = visible."""
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=mask,
            is_causal=causal and mask is None,
            enable_gqa=self.n_kv != self.n_heads,
        )  # [N, H, T, hd]
        n, _, t, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(n, t, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TargetConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


def causal_mask(t: int, s: int, device: torch.device) -> Tensor:
    """bool [t, s]: query i (absolute s − t + i) sees keys up to itself."""
    return torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)


class Qwen3Backbone(nn.Module):
    def __init__(self, cfg: TargetConfig, max_positions: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = RotaryTable(cfg.head_dim, cfg.rope_theta, max_positions)


class Qwen3ForCausalLM(nn.Module):
    """The target model. `forward` returns final-normed hidden states; `logits` applies the LM head."""

    def __init__(self, cfg: TargetConfig, max_positions: int | None = None) -> None:
        super().__init__()
        self.config = cfg
        self.model = Qwen3Backbone(cfg, max_positions or cfg.max_position_embeddings)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # Residual dropout for training only (not part of Qwen3, not saved): the stdlib corpus is
        # small enough for the target to memorise it.
        self.train_dropout = 0.0

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor,
        *,
        cache: KVCache | None = None,
        start: int = 0,
        mask: Tensor | None = None,
        capture: Sequence[int] = (),
    ) -> tuple[Tensor, list[Tensor]]:
        """Run the decoder stack.

        input_ids, positions: [N, T]. With `cache`, this call's K/V go to rows [start, start+T) and
        queries see rows [0, start+T). `mask` (bool [T, S] or [N, T, S], True = visible) replaces
        the default causal mask; tree verification passes the ancestor-only mask here.
        Returns (normed hidden [N, T, H], outputs of the layers listed in `capture`).
        """
        cos, sin = self.model.rotary(positions, self.model.embed_tokens.weight.dtype)
        h = self.model.embed_tokens(input_ids)
        t = input_ids.shape[1]
        outputs: dict[int, Tensor] = {}
        # One token, or a fresh sequence, needs no explicit mask: SDPA's causal flag covers it.
        if mask is None and cache is not None and start > 0 and t > 1:
            mask = causal_mask(t, start + t, input_ids.device)
        for i, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.query(x, cos, sin)
            k, v = attn.key_value(x, cos, sin)
            if cache is not None:
                k, v = cache.write(i, start, k, v)
            h = h + self._drop(attn.attend(q, k, v, mask, causal=t > 1 and start == 0))
            h = h + self._drop(layer.mlp(layer.post_attention_layernorm(h)))
            if i in capture:
                outputs[i] = h
        return self.model.norm(h), [outputs[i] for i in capture]

    def _drop(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.train_dropout, training=True) if self.training and self.train_dropout else x

    def logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden)
