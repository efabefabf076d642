"""Side-by-side baseline and divergence report for `python -m engine bench`.

- `hf_generate`: Hugging Face `transformers` greedy `generate` on the same target directory
  (it loads our HF-format weights unchanged), timed end to end like our decode loop.
- `divergences`: where a speculative output differs from `ar` on the same prompt, the first
  differing position and the target's top-1 − top-2 logit gap there. At T = 0 every algorithm
  commits the target's argmax, so a difference can only come from a near-tie that the different
  matrix shapes of a tree pass and a one-token pass round differently in bf16; a small gap says so.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from engine.decode import Decoder
from engine.sampling import SamplingParams


def hf_generate(
    model_dir: str | Path,
    prompts: list[list[int]],
    max_tokens: int,
    device: str,
    dtype: torch.dtype,
    repeats: int = 1,
) -> dict[str, Any]:
    """tokens/s of `transformers` greedy generate (`min_new_tokens` = `max_new_tokens`: no early EOS).

    The prompts run `repeats` times after one warm-up call; the figure is the median of the passes'
    rates (its own speed moves by ±15 % between identical calls on a GPU), all of them are kept.
    """
    from transformers import AutoModelForCausalLM  # optional: only this baseline needs it

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(device).eval()
    _generate(model, prompts[0], max_tokens, device)  # warm-up
    outputs: list[list[int]] = []
    rates, seconds, tokens = [], 0.0, 0
    for _ in range(repeats):
        pass_seconds, pass_tokens = 0.0, 0
        for prompt in prompts:
            out, took = _generate(model, prompt, max_tokens, device)
            pass_seconds += took
            pass_tokens += len(out)
            if len(outputs) < len(prompts):
                outputs.append(out)
        rates.append(pass_tokens / pass_seconds if pass_seconds else 0.0)
        seconds += pass_seconds
        tokens += pass_tokens
    return {
        "prompts": len(prompts),
        "max_tokens": max_tokens,
        "repeats": repeats,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_second": statistics.median(rates),
        "tokens_per_second_runs": rates,
        "outputs": outputs,
    }


def _generate(model: Any, prompt: list[int], max_tokens: int, device: str) -> tuple[list[int], float]:
    """One greedy generate: the new tokens and the seconds it took."""
    ids = torch.tensor([prompt], device=device)
    _sync(device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=model.config.eos_token_id,
        )
    _sync(device)
    return out[0, ids.shape[1] :].tolist(), time.perf_counter() - t0


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def logit_gap(decoder: Decoder, prefix: list[int]) -> dict[str, float | int]:
    """Top-1 and top-2 of the target's next-token logits after `prefix` (banned ids excluded)."""
    target = decoder.target
    ids = torch.tensor([prefix], device=decoder.device)
    hidden, _ = target(ids, torch.arange(len(prefix), device=decoder.device)[None])
    logits = hidden[0, -1].float() @ target.lm_head.weight.float().T  # fp32 head, as the fast path
    banned = decoder.banned_ids(SamplingParams(ignore_eos=True))
    if banned:
        logits[torch.tensor(banned, device=decoder.device)] = float("-inf")
    top = logits.topk(2)
    return {
        "top1": int(top.indices[0]),
        "top2": int(top.indices[1]),
        "gap": float(top.values[0] - top.values[1]),
    }


def divergences(
    decoder: Decoder, prompts: list[list[int]], ar: list[list[int]], other: list[list[int]]
) -> list[dict[str, Any]]:
    """For each prompt whose output differs from ar's: first differing position and the logit gap there."""
    found = []
    for i, (prompt, a, b) in enumerate(zip(prompts, ar, other, strict=True)):
        if a == b:
            continue
        pos = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        gap = logit_gap(decoder, prompt + a[:pos])
        found.append(
            {
                "prompt": i,
                "position": pos,
                "ar_token": a[pos] if pos < len(a) else None,
                "other_token": b[pos] if pos < len(b) else None,
                **gap,
            }
        )
    return found
