"""Target pretraining: next-token cross-entropy on random windows of the corpus token stream."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.model import Qwen3ForCausalLM
from engine.training.loop import Log, autocast, cosine_lr, random_windows, schedule


def lm_loss(model: Qwen3ForCausalLM, x: Tensor) -> Tensor:
    positions = torch.arange(x.shape[1], device=x.device).expand_as(x)
    hidden, _ = model(x, positions)
    logits = model.logits(hidden[:, :-1]).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


def pretrain(
    model: Qwen3ForCausalLM,
    train: Tensor,
    heldout: Tensor,
    *,
    steps: int,
    lr: float,
    seq_len: int,
    batch: int,
    device: torch.device,
    log: Log,
    seed: int = 0,
    max_seconds: float | None = None,
) -> dict[str, float]:
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=device.type == "cuda")
    model.train()
    loss = torch.tensor(0.0)
    # A small target on a ~10M-token corpus starts to memorise well before the schedule ends:
    # keep the weights with the best held-out loss (early stopping).
    best: tuple[float, int, float, dict[str, Tensor]] = (float("inf"), 0, 0.0, {})
    done = 0
    for step, report in schedule(steps, max(1, steps // 20), max_seconds):
        done = step + 1
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, lr)
        x = random_windows(train, seq_len, batch, gen).to(device, non_blocking=True)
        with autocast(device):
            loss = lm_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if report:
            held = evaluate(model, heldout, seq_len=seq_len, batch=batch, device=device)
            model.train()
            if held < best[0]:
                best = (held, done, loss.item(), {k: v.detach().clone() for k, v in model.state_dict().items()})
            log(f"target step {step}/{steps} loss {loss.item():.3f} held-out {held:.3f}")
    model.load_state_dict(best[3])
    model.eval()
    log(f"target: kept step {best[1]} (held-out loss {best[0]:.3f})")
    return {
        "train_loss": best[2],
        "heldout_loss": best[0],
        "steps": best[1],
        "planned_steps": steps,
        "ran_steps": done,
        "dropout": model.train_dropout,
    }


@torch.no_grad()
def evaluate(model: Qwen3ForCausalLM, stream: Tensor, *, seq_len: int, batch: int, device: torch.device) -> float:
    model.eval()
    gen = torch.Generator().manual_seed(1234)
    losses = []
    for _ in range(4):
        x = random_windows(stream, min(seq_len, stream.numel() - 1), batch, gen).to(device)
        with autocast(device):
            losses.append(lm_loss(model, x).item())
    return sum(losses) / len(losses)
