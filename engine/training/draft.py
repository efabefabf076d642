"""DFlash drafter training (DFlash §3–4; SpecForge's `dflash.py` objective).

For each training sequence the frozen target runs once and gives (a) the outputs of the chosen
layers at every position and (b) its next-token distribution at every position. Then many
anchors a are sampled; each anchor makes one block:
  input      target embeddings of [x_a, MASK, …, MASK] at positions a .. a+bs−1;
  context    projected features of positions < a only — strictly before the anchor, since the
             feature at a has already seen x_a's successor in training (leakage → zero
             acceptance at run time);
  attention  bidirectional within the block, no other block visible;
  loss       forward KL from the target's distribution at a+k−1 (which predicts x_{a+k}) to the
             drafter's output at block position k, k = 1..bs−1, weighted exp(−(k−1)/γ).
Trained: fc, hidden_norm, the drafter layers, its norm. Embedding and LM head stay the target's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.drafter import DFlashDrafter
from engine.model import Qwen3ForCausalLM
from engine.training.loop import Log, autocast, cosine_lr, schedule


def decay_gamma(block_size: int) -> float:
    """γ = 7 for block 16, 4 for block 8 (DFlash); in between, linear."""
    return 4.0 + 3.0 * (block_size - 8) / 8


def block_batch(x: Tensor, anchors: Tensor, block_size: int, mask_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """x: [N, S]; anchors: [N, A] → block ids, block positions [N, A*bs], attention mask [N, A*bs, S + A*bs]."""
    n, s = x.shape
    a = anchors.shape[1]
    offs = torch.arange(block_size, device=x.device)
    pos = (anchors[:, :, None] + offs).reshape(n, a * block_size)  # [N, A*bs]
    ids = torch.full((n, a, block_size), mask_id, device=x.device, dtype=x.dtype)
    ids[:, :, 0] = x.gather(1, anchors)
    # Context column c is visible to block j iff c < anchor_j; block columns only within the block.
    ctx_vis = torch.arange(s, device=x.device)[None, None, :] < anchors[:, :, None]  # [N, A, S]
    ctx_vis = ctx_vis[:, :, None, :].expand(n, a, block_size, s).reshape(n, a * block_size, s)
    blk = torch.arange(a, device=x.device).repeat_interleave(block_size)
    blk_vis = (blk[:, None] == blk[None, :])[None].expand(n, -1, -1)
    return ids.reshape(n, a * block_size), pos, torch.cat([ctx_vis, blk_vis], dim=-1)


def sample_anchors(
    n: int, s: int, count: int, block_size: int, gen: torch.Generator, low: Tensor | None = None
) -> Tensor:
    """[n, count] distinct anchors in 1..s−bs, sorted (at least one context token, a whole block of labels).

    low ([n], optional): where each row's generated continuation starts. Positions from there on
    are weighted so that about half of that row's anchors land in it (weighted sampling without
    replacement: keys log(u)/w, top-k) — run-time anchors are always in generated text.
    """
    span = s - block_size
    keys = torch.rand(n, span, generator=gen).log()
    if low is not None:
        start = (low.clamp(1, span) - 1).to(torch.float32)[:, None]  # index of the first generated anchor
        weight = (start / (span - start).clamp(min=1)).clamp(min=1.0)
        keys = torch.where(torch.arange(span)[None, :] >= start, keys / weight, keys)
    return (keys.topk(count, dim=1).indices + 1).sort(dim=1).values


def draft_step_loss(
    target: Qwen3ForCausalLM, drafter: DFlashDrafter, x: Tensor, anchors: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor]:
    """Weighted KL loss and per-position top-1 agreement with the target ([bs−1])."""
    cfg = drafter.config
    bs = cfg.block_size
    n, s = x.shape
    with torch.no_grad():
        positions = torch.arange(s, device=x.device).expand(n, -1)
        hidden, feats = target(x, positions, capture=cfg.target_layer_ids)
        ids, pos, mask = block_batch(x, anchors, bs, cfg.mask_token_id)
        # The target's distribution at position p predicts token p+1: block position k ↔ p = a+k−1.
        label_pos = (pos - 1).reshape(n, -1, bs)[:, :, 1:].reshape(n, -1)
        t_logits = target.logits(hidden.gather(1, label_pos[..., None].expand(-1, -1, hidden.shape[-1]))).float()
        t_logp = F.log_softmax(t_logits, -1)
        emb = target.model.embed_tokens(ids)
    ctx = drafter.project(feats)
    h = drafter(emb, pos, ctx, positions, mask=mask)
    h = h.reshape(n, -1, bs, h.shape[-1])[:, :, 1:].reshape(n, -1, h.shape[-1])
    d_logp = F.log_softmax(target.logits(h).float(), -1)
    kl = (t_logp.exp() * (t_logp - d_logp)).sum(-1).reshape(n, -1, bs - 1)  # [N, A, bs−1]
    loss = (kl * weights).sum(-1).mean() / weights.sum()
    agree = (d_logp.argmax(-1) == t_logp.argmax(-1)).float().reshape(n, -1, bs - 1).mean(dim=(0, 1))
    return loss, agree


@dataclass
class DraftData:
    """Training sequences of one length: [M, S] token ids, and where each row's generated part
    starts ([M]; 0 for a plain corpus window)."""

    tokens: Tensor
    generated_from: Tensor


def train_drafter(
    target: Qwen3ForCausalLM,
    drafter: DFlashDrafter,
    data: list[DraftData],
    *,
    steps: int,
    lr: float,
    batch: int,
    anchors: int,
    device: torch.device,
    log: Log,
    seed: int = 2,
    max_seconds: float | None = None,
) -> dict[str, object]:
    """Each step draws one group of `data` (in turn); longer groups get a proportionally smaller
    batch and more anchors per sequence, so every step sees about as many tokens and blocks."""
    bs = drafter.config.block_size
    gen = torch.Generator().manual_seed(seed)
    gamma = decay_gamma(bs)
    weights = torch.tensor([math.exp(-k / gamma) for k in range(bs - 1)], device=device)
    shortest = min(d.tokens.shape[1] for d in data)
    shapes = []
    for d in data:
        s = d.tokens.shape[1]
        shapes.append((max(1, batch * shortest // s), min((s - bs) // 2, anchors * s // shortest)))
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(
        drafter.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01, fused=device.type == "cuda"
    )
    drafter.train()
    agree_sum = torch.zeros(bs - 1, device=device)
    agree_n = 0
    loss = torch.tensor(0.0)
    done = 0
    for step, report in schedule(steps, max(1, steps // 20), max_seconds):
        done = step + 1
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, lr, warmup_frac=0.04)
        d = data[step % len(data)]
        n, count = shapes[step % len(data)]
        rows = torch.randint(0, d.tokens.shape[0], (n,), generator=gen)
        x = d.tokens[rows].to(device, non_blocking=True)
        a = sample_anchors(n, x.shape[1], count, bs, gen, d.generated_from[rows]).to(device)
        with autocast(device):
            loss, agree = draft_step_loss(target, drafter, x, a, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        if step >= steps * 0.9 or report:  # telemetry: the last tenth of training (or the last logged step)
            if not step >= steps * 0.9:
                agree_sum.zero_()
                agree_n = 0
            agree_sum += agree.detach()
            agree_n += 1
        if report:
            log(
                f"drafter step {step}/{steps} (length {x.shape[1]}) loss {loss.item():.4f} top-1 agreement by depth "
                + " ".join(f"{v:.2f}" for v in agree.tolist())
            )
    drafter.eval()
    per_pos = (agree_sum / max(1, agree_n)).tolist()
    return {
        "final_loss": float(loss.item()),
        "steps": done,
        "planned_steps": steps,
        "lr": lr,
        "sequence_lengths": [d.tokens.shape[1] for d in data],
        "top1_per_position": [round(v, 4) for v in per_pos],
    }
