"""Target and drafter forwards over static buffers, with fewer kernels per layer, for the fast path.

Same weights as `engine.model` / `engine.drafter` (fused copies of the projections), but:
  - shapes never depend on the context length: K/V live in one tensor per model, `[layers, 2,
    rows, kv_heads, head_dim]`, rows are written at device-tensor indices, and attention reads a
    fixed bucket of `keys` rows under a boolean mask that hides rows outside the sequence — so one
    CUDA graph per (width, bucket) serves every round;
  - a small model is launch-bound, so each layer is ~20 kernels instead of ~55: q/k/v and
    gate/up are one matmul each, q- and k-norm are one `rms_norm` with per-head weights, RoPE is
    x·cos + roll(x)·(±sin), RMSNorm is the fused `F.rms_norm`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.drafter import DFlashDrafter
from engine.model import DecoderLayer, Qwen3ForCausalLM, RMSNorm, RotaryTable


def kv_buffer(layers: int, kv_heads: int, head_dim: int, rows: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    # Zeros, not empty: masked rows still enter attention as 0 · V, and V must be finite.
    return torch.zeros(layers, 2, rows, kv_heads, head_dim, dtype=dtype, device=device)


def norm(x: Tensor, layer: RMSNorm) -> Tensor:
    return F.rms_norm(x, (x.shape[-1],), layer.weight, layer.eps)


def signed_sin(table: RotaryTable) -> Tensor:
    """The sin table with the first half negated (built once, outside any graph capture)."""
    half = table.head_dim // 2
    return torch.cat([-table.sin[:, :half], table.sin[:, half:]], dim=-1)


class Rope:
    """cos and sign-folded sin at given positions: rotate_half(x)·sin = roll(x, hd/2)·(±sin)."""

    def __init__(self, table: RotaryTable, sin: Tensor, positions: Tensor, dtype: torch.dtype) -> None:
        self.half = table.head_dim // 2
        self.positions, self.cos_table, self.sin_table = positions, table.cos, sin  # for the Triton kernel
        self.cos = table.cos[positions].to(dtype)[None, :, None, :]  # [1, T, 1, hd]
        self.sin = sin[positions].to(dtype)[None, :, None, :]

    def __call__(self, x: Tensor) -> Tensor:
        return x * self.cos + torch.roll(x, self.half, dims=-1) * self.sin


class FusedLayer:
    def __init__(self, layer: DecoderLayer) -> None:
        a, m = layer.self_attn, layer.mlp
        self.layer, self.attn = layer, a
        self.h, self.kvh, self.hd = a.n_heads, a.n_kv, a.head_dim
        self.qkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
        self.kv = torch.cat([a.k_proj.weight, a.v_proj.weight])
        self.qk_norm = torch.cat([a.q_norm.weight.expand(self.h, -1), a.k_norm.weight.expand(self.kvh, -1)])
        self.gate_up = torch.cat([m.gate_proj.weight, m.up_proj.weight])
        self.inter = m.gate_proj.weight.shape[0]

    def _heads_norm(self, x: Tensor, weight: Tensor) -> Tensor:
        return F.rms_norm(x, (self.hd,), None, self.attn.q_norm.eps) * weight

    def qkv_rows(self, x: Tensor, rope: Rope) -> tuple[Tensor, Tensor, Tensor]:
        """x [1, T, D] (already normed) → q [1, T, H, hd], k, v [1, T, KV, hd]."""
        t, nq = x.shape[1], (self.h + self.kvh) * self.hd
        qkv = F.linear(x, self.qkv)
        qk = rope(self._heads_norm(qkv[..., :nq].view(1, t, self.h + self.kvh, self.hd), self.qk_norm))
        return qk[:, :, : self.h], qk[:, :, self.h :], qkv[..., nq:].view(1, t, self.kvh, self.hd)

    def qkv_store(self, x: Tensor, rope: Rope, cache: Tensor, rows: Tensor, triton: bool) -> Tensor:
        """q [1, T, H, hd]; k and v go to cache ([2, rows, KV, hd]) at `rows`."""
        if triton:
            from engine.fast.qkv_triton import qkv_store

            qkv = F.linear(x, self.qkv)[0]
            eps = self.attn.q_norm.eps
            return qkv_store(
                qkv, self.qk_norm, rope.cos_table, rope.sin_table, rope.positions, rows, cache, self.h, self.kvh, eps
            )
        q, k, v = self.qkv_rows(x, rope)
        cache[0].index_copy_(0, rows, k[0])
        cache[1].index_copy_(0, rows, v[0])
        return q

    def kv_rows(self, x: Tensor, rope: Rope) -> tuple[Tensor, Tensor]:
        t, nk = x.shape[1], self.kvh * self.hd
        kv = F.linear(x, self.kv)
        k = rope(self._heads_norm(kv[..., :nk].view(1, t, self.kvh, self.hd), self.qk_norm[self.h :]))
        return k, kv[..., nk:].view(1, t, self.kvh, self.hd)

    def attend(self, q: Tensor, cache: Tensor, keys: int, mask: Tensor) -> Tensor:
        """q [1, T, H, hd] over cache rows [0, keys) (cache: [2, rows, KV, hd]); mask bool [T, keys]."""
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            cache[0, :keys][None].transpose(1, 2),
            cache[1, :keys][None].transpose(1, 2),
            attn_mask=mask,
            enable_gqa=self.kvh != self.h,
        )
        return self.attn.o_proj(out.transpose(1, 2).reshape(1, q.shape[1], self.h * self.hd))

    def attend_tree(self, q: Tensor, cache: Tensor, keys: int, past: Tensor, packed_mask: Tensor) -> Tensor:
        """Like `attend`, through the tree-attention kernel: rows [0, past) all visible, the T tree rows
        at [past, past + T) under the packed ancestor mask (engine.kernels.tree_attention)."""
        from engine.kernels.tree_attention import tree_attention

        out = tree_attention(q, cache[0, :keys][None], cache[1, :keys][None], past, packed_mask)
        return self.attn.o_proj(out.reshape(1, q.shape[1], self.h * self.hd))

    def mlp(self, h: Tensor) -> Tensor:
        gu = F.linear(norm(h, self.layer.post_attention_layernorm), self.gate_up)
        return self.layer.mlp.down_proj(F.silu(gu[..., : self.inter]) * gu[..., self.inter :])


class FusedTarget:
    def __init__(self, model: Qwen3ForCausalLM) -> None:
        self.model = model
        self.layers = [FusedLayer(layer) for layer in model.model.layers]
        self.sin = signed_sin(model.model.rotary)
        self.triton = False  # set by FastPath on CUDA: q/k norm, RoPE and the cache write in one kernel

    def forward(
        self,
        ids: Tensor,
        positions: Tensor,
        kv: Tensor,
        rows: Tensor,
        keys: int,
        mask: Tensor | None,
        capture: Sequence[int],
        tree: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """ids, positions, rows: [T]; mask: bool [T, keys], or `tree` = (past: 0-dim long, packed
        ancestor mask) for the tree-attention kernel. Writes K/V at `rows`; returns (normed hidden
        [T, H], the captured layers' outputs concatenated [T, len(capture)·H])."""
        m = self.model.model
        rope = Rope(m.rotary, self.sin, positions, m.embed_tokens.weight.dtype)
        h = m.embed_tokens(ids[None])
        outputs = []
        for i, fl in enumerate(self.layers):
            q = fl.qkv_store(norm(h, fl.layer.input_layernorm), rope, kv[i], rows, self.triton)
            if tree is not None:
                h = h + fl.attend_tree(q, kv[i], keys, *tree)
            else:
                assert mask is not None
                h = h + fl.attend(q, kv[i], keys, mask)
            h = h + fl.mlp(h)
            if i in capture:
                outputs.append(h[0])
        feats = torch.cat(outputs, dim=-1) if outputs else h[0, :, :0]
        return norm(h, m.norm)[0], feats


class FusedDrafter:
    def __init__(self, drafter: DFlashDrafter) -> None:
        self.drafter = drafter
        self.layers = [FusedLayer(layer) for layer in drafter.layers]
        self.sin = signed_sin(drafter.rotary)
        self.triton = False

    def project(self, feats: Tensor) -> Tensor:
        return norm(self.drafter.fc(feats[None]), self.drafter.hidden_norm)

    def context(self, feats: Tensor, positions: Tensor, dkv: Tensor, rows: Tensor) -> None:
        """Project target features [C, F] and store every layer's context K/V at `rows`."""
        ctx = self.project(feats)
        rope = Rope(self.drafter.rotary, self.sin, positions, ctx.dtype)
        for i, fl in enumerate(self.layers):
            k, v = fl.kv_rows(ctx, rope)
            dkv[i, 0].index_copy_(0, rows, k[0])
            dkv[i, 1].index_copy_(0, rows, v[0])

    def forward(
        self, block_emb: Tensor, block_pos: Tensor, feats: Tensor, ctx_pos: Tensor, dkv: Tensor, keys: int, mask: Tensor
    ) -> Tensor:
        """One draft pass. block_emb [Q, H] at block_pos [Q]; feats [Q, F]: target features of the
        newly committed tokens at ctx_pos (rows past the committed ones are scratch: the block's
        own K/V, written after, overwrite them). mask: bool [Q, keys]. Returns normed hidden [Q, H]."""
        d = self.drafter
        ctx = self.project(feats)
        q_rope = Rope(d.rotary, self.sin, block_pos, ctx.dtype)
        c_rope = Rope(d.rotary, self.sin, ctx_pos, ctx.dtype)
        h = block_emb[None]
        for i, fl in enumerate(self.layers):
            k_ctx, v_ctx = fl.kv_rows(ctx, c_rope)
            dkv[i, 0].index_copy_(0, ctx_pos, k_ctx[0])
            dkv[i, 1].index_copy_(0, ctx_pos, v_ctx[0])
            q = fl.qkv_store(norm(h, fl.layer.input_layernorm), q_rope, dkv[i], block_pos, self.triton)
            h = h + fl.attend(q, dkv[i], keys, mask)
            h = h + fl.mlp(h)
        return norm(h, d.norm)[0]
