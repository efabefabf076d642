"""Target and drafter forwards over static buffers, with fewer kernels per layer, for the fast path.

Same weights as `engine.model` / `engine.drafter` (fused copies of the projections), but:
  - shapes never depend on the context length: K/V live in one tensor per model, `[layers, 2,
    rows, kv_heads, head_dim]`, rows are written at device-tensor indices, and attention reads a
    fixed bucket of `keys` rows under a boolean mask that hides rows outside the sequence — so one
    CUDA graph per (width, bucket) serves every round;
  - a small model is launch-bound, so each layer is ~20 kernels instead of ~55 in PyTorch ops: q/k/v
    and gate/up are one matmul each, q- and k-norm are one `rms_norm` with per-head weights, RoPE
    is x·cos + roll(x)·(±sin), RMSNorm is the fused `F.rms_norm`; and with the Triton kernels of
    linear_triton.py (CUDA) four launches plus attention.
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
        self.positions, self.cos_table, self.sin_table = positions, table.cos, sin  # for the Triton kernels
        self.dtype = dtype
        self._rows: tuple[Tensor, Tensor] | None = None  # gathered on first use: the Triton path never needs them

    def __call__(self, x: Tensor) -> Tensor:
        if self._rows is None:
            cos = self.cos_table[self.positions].to(self.dtype)[None, :, None, :]  # [1, T, 1, hd]
            self._rows = cos, self.sin_table[self.positions].to(self.dtype)[None, :, None, :]
        cos, sin = self._rows
        return x * cos + torch.roll(x, self.half, dims=-1) * sin


class FusedLayer:
    """One decoder layer's weights fused for the fast path, and its steps in PyTorch ops or, with
    `triton` / `triton_mlp`, in the kernels of engine/fast/linear_triton.py."""

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

    def qkv_store(self, h: Tensor, rope: Rope, cache: Tensor, rows: Tensor, triton: bool) -> Tensor:
        """h [1, T, D] (the residual stream, not normed) → q [1, T, H, hd]; RMSNorm, the q/k/v projection,
        q/k norm and RoPE; k and v go to cache ([2, rows, KV, hd]) at `rows`."""
        if triton:
            return self._qkv_triton(h[0], rope, cache, rows)[0]
        ln = self.layer.input_layernorm
        t, nq = h.shape[1], (self.h + self.kvh) * self.hd
        qkv = F.linear(norm(h, ln), self.qkv)
        qk = rope(self._heads_norm(qkv[..., :nq].view(1, t, self.h + self.kvh, self.hd), self.qk_norm))
        cache[0].index_copy_(0, rows, qk[0, :, self.h :])
        cache[1].index_copy_(0, rows, qkv[0, :, nq:].view(t, self.kvh, self.hd))
        return qk[:, :, : self.h]

    def embed_qkv_store(
        self, table: Tensor, ids: Tensor, rope: Rope, cache: Tensor, rows: Tensor
    ) -> tuple[Tensor, Tensor]:
        """`qkv_store` of the embedding rows table[ids] in one Triton launch; returns (q, those rows
        [1, T, D]: the residual stream)."""
        q, h = self._qkv_triton(table, rope, cache, rows, ids)
        assert h is not None
        return q, h[None]

    def _qkv_triton(
        self, x: Tensor, rope: Rope, cache: Tensor, rows: Tensor, ids: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """linear_triton.qkv_linear with this layer's weights (x: the input rows, or with ids the table)."""
        from engine.fast.linear_triton import qkv_linear

        ln = self.layer.input_layernorm
        return qkv_linear(
            x, self.qkv, ln.weight, ln.eps, self.qk_norm, self.attn.q_norm.eps, rope.cos_table, rope.sin_table,
            rope.positions, rows, cache, self.h, self.kvh, ids=ids,
        )  # fmt: skip

    def kv_store(self, ctx: Tensor, rope: Rope, cache: Tensor, rows: Tensor, triton: bool) -> None:
        """The drafter's context: ctx [1, C, D] (already normed) → k, v at cache[0|1, rows]."""
        if triton:
            from engine.fast.linear_triton import qkv_linear

            eps = self.attn.k_norm.eps
            qkv_linear(
                ctx[0], self.kv, None, 0.0, self.qk_norm[self.h :], eps, rope.cos_table, rope.sin_table, rope.positions,
                rows, cache, 0, self.kvh,
            )  # fmt: skip
            return
        t, nk = ctx.shape[1], self.kvh * self.hd
        kv = F.linear(ctx, self.kv)
        k = rope(self._heads_norm(kv[..., :nk].view(1, t, self.kvh, self.hd), self.qk_norm[self.h :]))
        cache[0].index_copy_(0, rows, k[0])
        cache[1].index_copy_(0, rows, kv[0, :, nk:].view(t, self.kvh, self.hd))

    def attend(self, q: Tensor, cache: Tensor, keys: int, mask: Tensor) -> Tensor:
        """q [1, T, H, hd] over cache rows [0, keys) (cache: [2, rows, KV, hd]); mask bool [T, keys].
        Returns the heads' outputs [1, T, H·hd] (before o_proj)."""
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            cache[0, :keys][None].transpose(1, 2),
            cache[1, :keys][None].transpose(1, 2),
            attn_mask=mask,
            enable_gqa=self.kvh != self.h,
        )
        return out.transpose(1, 2).reshape(1, q.shape[1], self.h * self.hd)

    def attend_tree(self, q: Tensor, cache: Tensor, keys: int, past: Tensor, packed_mask: Tensor | None) -> Tensor:
        """Like `attend`, through the tree-attention kernel: rows [0, past) all visible, the T tree rows
        at [past, past + T) under the packed ancestor mask, or none without one
        (engine.kernels.tree_attention)."""
        from engine.kernels.tree_attention import tree_attention

        out = tree_attention(q, cache[0, :keys][None], cache[1, :keys][None], past, packed_mask)
        return out.reshape(1, q.shape[1], self.h * self.hd)

    def attention(
        self, q: Tensor, cache: Tensor, keys: int, mask: Tensor | None, tree: tuple[Tensor, Tensor | None] | None
    ) -> Tensor:
        """`attend_tree` when `tree` = (past, packed mask or None) is given, else `attend` under `mask`."""
        if tree is not None:
            return self.attend_tree(q, cache, keys, *tree)
        assert mask is not None
        return self.attend(q, cache, keys, mask)

    def finish(self, h: Tensor, heads: Tensor, triton: bool) -> Tensor:
        """h + o_proj(heads), then h + MLP(RMSNorm(h)): the rest of the layer."""
        if triton:
            from engine.fast.linear_triton import linear

            ln = self.layer.post_attention_layernorm
            h2 = linear(heads[0], self.attn.o_proj.weight, residual=h[0])
            act = linear(h2, self.gate_up, norm=ln.weight, eps=ln.eps, swiglu=True)
            return linear(act, self.layer.mlp.down_proj.weight, residual=h2)[None]
        h = h + self.attn.o_proj(heads)
        gu = F.linear(norm(h, self.layer.post_attention_layernorm), self.gate_up)
        return h + self.layer.mlp.down_proj(F.silu(gu[..., : self.inter]) * gu[..., self.inter :])


class FusedTarget:
    def __init__(self, model: Qwen3ForCausalLM) -> None:
        self.model = model
        self.layers = [FusedLayer(layer) for layer in model.model.layers]
        self.sin = signed_sin(model.model.rotary)
        # Set by FastPath on CUDA: RMSNorm + q/k/v + q/k norm + RoPE + cache write in one kernel
        # (`triton`), o_proj + residual, RMSNorm + gate/up + SwiGLU, down + residual in three (`triton_mlp`).
        self.triton = False
        self.triton_mlp = False

    def forward(
        self,
        ids: Tensor,
        positions: Tensor,
        kv: Tensor,
        rows: Tensor,
        keys: int,
        mask: Tensor | None,
        capture: Sequence[int],
        tree: tuple[Tensor, Tensor | None] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """ids, positions, rows: [T]; mask: bool [T, keys], or `tree` = (past: 0-dim long, packed
        ancestor mask, or None when the T rows are all below past) for the tree-attention kernel.
        Writes K/V at `rows`; returns (the last layer's output [T, H], before the final norm — the LM
        head applies it — and the captured layers' outputs concatenated [T, len(capture)·H])."""
        m = self.model.model
        rope = Rope(m.rotary, self.sin, positions, m.embed_tokens.weight.dtype)
        outputs = []
        # (a tree slot with no node holds token −1: any row will do, its outputs are never used)
        h = None if self.triton else m.embed_tokens(ids.clamp(min=0)[None])
        for i, fl in enumerate(self.layers):
            if h is None:  # the embedding lookup inside the first q/k/v kernel
                q, h = fl.embed_qkv_store(m.embed_tokens.weight, ids, rope, kv[i], rows)
            else:
                q = fl.qkv_store(h, rope, kv[i], rows, self.triton)
            h = fl.finish(h, fl.attention(q, kv[i], keys, mask, tree), self.triton_mlp)
            if i in capture:
                outputs.append(h[0])
        feats = torch.cat(outputs, dim=-1) if outputs else h[0, :, :0]
        return h[0], feats


class FusedDrafter:
    def __init__(self, drafter: DFlashDrafter, embed: Tensor) -> None:
        """embed: the target's embedding table (the block's ids are looked up in it)."""
        self.drafter, self.embed = drafter, embed
        self.layers = [FusedLayer(layer) for layer in drafter.layers]
        self.sin = signed_sin(drafter.rotary)
        self.triton = False
        self.triton_mlp = False

    def project(self, feats: Tensor) -> Tensor:
        return norm(self.drafter.fc(feats[None]), self.drafter.hidden_norm)

    def context(self, feats: Tensor, positions: Tensor, dkv: Tensor, rows: Tensor) -> None:
        """Project target features [C, F] and store every layer's context K/V at `rows`."""
        ctx = self.project(feats)
        rope = Rope(self.drafter.rotary, self.sin, positions, ctx.dtype)
        for i, fl in enumerate(self.layers):
            fl.kv_store(ctx, rope, dkv[i], rows, self.triton)

    def forward(
        self,
        block_ids: Tensor,
        block_pos: Tensor,
        feats: Tensor,
        ctx_pos: Tensor,
        dkv: Tensor,
        keys: int,
        mask: Tensor | None,
        tree: tuple[Tensor, None] | None = None,
    ) -> Tensor:
        """One draft pass. block_ids [Q] at block_pos [Q]; feats [Q, F]: target features of the
        newly committed tokens at ctx_pos (rows past the committed ones are scratch: the block's
        own K/V, written after, overwrite them). mask: bool [Q, keys]; or `tree` = (the block's end
        row, None): every row before it is visible, through the
        tree-attention kernel (the block rows are then ordinary past rows, seen by every query, as
        DFlash's bidirectional block wants). Returns the last layer's output [Q, H] (before the final
        norm)."""
        d = self.drafter
        ctx = self.project(feats)
        q_rope = Rope(d.rotary, self.sin, block_pos, ctx.dtype)
        c_rope = Rope(d.rotary, self.sin, ctx_pos, ctx.dtype)
        h = None if self.triton else F.embedding(block_ids, self.embed)[None]
        for i, fl in enumerate(self.layers):
            fl.kv_store(ctx, c_rope, dkv[i], ctx_pos, self.triton)
            if h is None:  # the embedding lookup inside the first q/k/v kernel
                q, h = fl.embed_qkv_store(self.embed, block_ids, q_rope, dkv[i], block_pos)
            else:
                q = fl.qkv_store(h, q_rope, dkv[i], block_pos, self.triton)
            h = fl.finish(h, fl.attention(q, dkv[i], keys, mask, tree), self.triton_mlp)
        return h[0]
