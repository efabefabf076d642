"""The model card written next to each trained pair."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _lengths(value: object) -> str:
    return "/".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _shape(draft: dict[str, Any]) -> str:
    if "layers" not in draft:
        return ""
    return f" ({draft['layers']} layers reading target layers {draft['target_layer_ids']})"


def write_card(out: Path, r: dict[str, Any]) -> None:
    target, draft = r.get("target", {}), r.get("draft", {})
    per_pos = draft.get("top1_per_position", [])
    lines = [
        f"# `{r['preset']}` models: Qwen3-architecture target + DFlash drafter",
        "",
        "Trained by `python -m engine.training` (engine/README.md). Written by the training run; do not edit.",
        "",
        f"- Corpus: the Python {r['python_version']} standard library (every `*.py`, its test suite where installed), "
        f"{r['corpus_files']} files, {r['corpus_bytes'] / 1e6:.1f} MB, {r['train_tokens']:,} tokens; "
        f"held out for evaluation: {', '.join(r['heldout_modules'])}.",
        f"- Trained on: {r['device']}, torch {r['torch']}, {r.get('train_seconds', '?')} s in all.",
        f"- Target: {r.get('target_parameters', 0) / 1e6:.2f}M parameters, kept step {target.get('steps')} of "
        f"{target.get('ran_steps', target.get('steps'))} (best held-out loss), "
        f"residual dropout {target.get('dropout', 0.0)}, train loss {target.get('train_loss', float('nan')):.3f}, "
        f"held-out loss {target.get('heldout_loss', float('nan')):.3f} nats/token.",
        f"- Drafter: {r.get('draft_parameters', 0) / 1e6:.2f}M parameters{_shape(draft)}, {draft.get('steps')} steps, "
        f"final loss {draft.get('final_loss', float('nan')):.4f}; on-policy data {r['onpolicy']['sequences']} × "
        f"{r['onpolicy']['new_tokens']} greedy tokens after prompts of {_lengths(r['onpolicy'].get('prompt_tokens'))} "
        f"tokens{' (fine-tuned from the previous drafter)' if r['onpolicy'].get('resumed') else ''}.",
        "- Drafter top-1 agreement with the target by depth (last 10 % of training): "
        + ", ".join(f"{i + 1}: {v:.2f}" for i, v in enumerate(per_pos)),
        "",
        "Measured τ (tokens per verify pass, bonus included), T = 0, fp32, held-out code prompts, 128 new tokens:",
        "",
        "| algorithm | τ | output identical to ar |",
        "|---|---|---|",
    ]
    for label, v in r.get("eval", {}).items():
        lines.append(f"| {label} | {v['tau']:.2f} | {v['identical_to_ar'] if label != 'ar' else '—'} |")
    by_context = r.get("eval_by_context", {})
    if by_context:
        labels = list(next(iter(by_context.values())))
        lines += [
            "",
            "τ on prompts cut to exact token lengths (`engine/bench_prompts.py`), same settings:",
            "",
            "| context | " + " | ".join(labels) + " |",
            "|---" * (len(labels) + 1) + "|",
        ]
        lines += [f"| {c} | " + " | ".join(f"{taus[k]:.2f}" for k in labels) + " |" for c, taus in by_context.items()]
    (out / "MODEL_CARD.md").write_text("\n".join(lines) + "\n")
