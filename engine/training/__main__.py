"""`python -m engine.training --preset tiny|small --out DIR`: train a target + DFlash drafter pair.

Stages: corpus (stdlib of this interpreter) → byte-level BPE → target pretraining → on-policy
continuations → drafter training → save (bf16 safetensors) → evaluate τ → model card.
`--stages draft` retrains only the drafter against the target already in DIR; with
`--resume-draft` it starts from the drafter already there (fine-tuning, e.g. on longer contexts).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from engine.bench import run_bench
from engine.bench_prompts import context_prompts
from engine.checkpoint import load_drafter, load_target, save_model
from engine.config import PRESETS
from engine.drafter import DFlashDrafter
from engine.model import Qwen3ForCausalLM
from engine.runtime import load_decoder, resolve_device
from engine.tokenizer import MASK, Tokenizer
from engine.training.bpe import train_bpe
from engine.training.card import write_card
from engine.training.corpus import load_corpus, prompts_from
from engine.training.draft import DraftData, train_drafter
from engine.training.loop import Log, init_weights, random_windows
from engine.training.onpolicy import generate_onpolicy
from engine.training.pretrain import pretrain


def encode_stream(tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """Documents as one stream: BOS, the text, EOS; repeated."""
    ids: list[int] = []
    for enc in tok.hf.encode_batch(texts, add_special_tokens=False):
        ids += [tok.bos_id, *enc.ids, tok.eos_id]  # type: ignore[list-item]
    return torch.tensor(ids, dtype=torch.long)


def _lengths(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token counts, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"prompt lengths must be >= 1, got {text!r}")
    return values


def _layer_ids(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer numbers, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.training")
    p.add_argument("--preset", choices=sorted(PRESETS), required=True)
    p.add_argument("--out", required=True, help="writes OUT/target, OUT/draft, OUT/MODEL_CARD.md, OUT/training.json")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--stages", default="all", choices=["all", "draft"])
    p.add_argument("--target-steps", type=int, help="override the preset")
    p.add_argument("--draft-steps", type=int, help="override the preset")
    p.add_argument("--onpolicy-prompts", type=int, help="override the preset")
    p.add_argument("--onpolicy-contexts", type=_lengths, help="override the preset: prompt lengths, e.g. 256,1024")
    p.add_argument("--draft-lr", type=float, help="override the preset")
    p.add_argument("--resume-draft", action="store_true", help="start from OUT/draft instead of a fresh drafter")
    p.add_argument("--draft-layers", type=int, help="override the preset's drafter depth")
    p.add_argument("--draft-target-layers", type=_layer_ids, help="target layers the drafter reads, e.g. 1,3,5")
    p.add_argument("--eval-prompts", type=int, default=12)
    p.add_argument(
        "--eval-contexts", type=_lengths, default=(1024,), help="also measure τ on prompts of these token lengths"
    )
    p.add_argument("--target-seconds", type=float, help="stop target pretraining after this long")
    p.add_argument("--draft-seconds", type=float, help="stop drafter training after this long")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    preset = PRESETS[args.preset]
    out = Path(args.out)
    try:
        device = torch.device(resolve_device(args.device))
    except ValueError as e:
        p.error(str(e))
    log = Log()
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    started = time.time()
    report: dict[str, object] = {"preset": preset.name, "device": str(device), "torch": torch.__version__}
    previous = out / "training.json"
    if args.resume_draft and args.stages != "draft":
        p.error("--resume-draft needs --stages draft")
    if args.resume_draft and (args.draft_layers or args.draft_target_layers):
        p.error("--resume-draft keeps the drafter's shape: drop --draft-layers / --draft-target-layers")
    if args.draft_layers is not None and args.draft_layers < 1:
        p.error(f"--draft-layers must be at least 1, got {args.draft_layers}")
    if args.stages == "draft" and previous.exists():
        report = {**json.loads(previous.read_text()), **report}

    corpus = load_corpus(preset.corpus_bytes)
    report.update(
        python_version=corpus.python_version,
        corpus_files=len(corpus.train),
        corpus_bytes=corpus.train_bytes,
        heldout_modules=sorted(corpus.heldout),
    )
    log(f"corpus: {len(corpus.train)} files, {corpus.train_bytes / 1e6:.1f} MB, Python {corpus.python_version}")

    if args.stages == "all":
        (out / "target").mkdir(parents=True, exist_ok=True)
        train_bpe(corpus.train, preset.vocab_size).save(str(out / "target" / "tokenizer.json"))
    tok = Tokenizer.load(out / "target")
    train = encode_stream(tok, corpus.train)
    heldout = encode_stream(tok, list(corpus.heldout.values()))
    report["train_tokens"] = train.numel()
    bytes_per_token = corpus.train_bytes / train.numel()
    log(f"tokens: {train.numel()} train, {heldout.numel()} held out ({bytes_per_token:.2f} bytes/token)")

    if args.stages == "all":
        assert tok.bos_id is not None and tok.eos_id is not None
        target = Qwen3ForCausalLM(preset.target_config(tok.bos_id, tok.eos_id))
        init_weights(target)
        target.train_dropout = preset.dropout
        target.to(device)
        report["target"] = pretrain(
            target,
            train,
            heldout,
            steps=args.target_steps or preset.target_steps,
            lr=preset.target_lr,
            seq_len=preset.seq_len,
            batch=preset.batch_size,
            device=device,
            log=log,
            max_seconds=args.target_seconds,
        )
        report["target_parameters"] = sum(p.numel() for p in target.parameters())
        save_model(target, out / "target")
    else:
        target = load_target(out / "target", device=str(device))

    mask_id = tok.token_id(MASK)
    assert mask_id is not None
    target.train_dropout = 0.0
    try:  # checked before the on-policy data is generated
        config = preset.drafter_config(target.config, mask_id, args.draft_layers, args.draft_target_layers)
    except ValueError as e:
        p.error(str(e))
    contexts = args.onpolicy_contexts or preset.contexts()
    n_prompts = args.onpolicy_prompts or preset.onpolicy_prompts
    gen = torch.Generator().manual_seed(args.seed + 7)
    data: list[DraftData] = []
    for i, context in enumerate(contexts):
        if context + preset.onpolicy_tokens >= train.numel():
            p.error(f"on-policy context {context} is longer than the training text")
        onpolicy = generate_onpolicy(
            target,
            train,
            tok.special_ids,
            prompts=max(1, n_prompts // len(contexts)),
            prompt_len=context,
            new_tokens=preset.onpolicy_tokens,
            batch=512 if device.type == "cuda" else 64,
            device=device,
            log=log,
            seed=1 + i,
        )
        # As many plain corpus windows of the same length: the drafter also sees human-written code.
        windows = random_windows(train, onpolicy.shape[1], onpolicy.shape[0], gen)
        starts = torch.cat([torch.full((onpolicy.shape[0],), context), torch.zeros(windows.shape[0], dtype=torch.long)])
        data.append(DraftData(torch.cat([onpolicy, windows]), starts))

    if args.resume_draft:
        drafter = load_drafter(out / "draft")  # fp32, like a fresh one
    else:
        drafter = DFlashDrafter(config)
        init_weights(drafter)
    drafter.to(device)
    trained = train_drafter(
        target,
        drafter,
        data,
        steps=args.draft_steps or preset.draft_steps,
        lr=args.draft_lr or preset.draft_lr,
        batch=preset.batch_size,
        anchors=preset.anchors_per_seq,
        device=device,
        log=log,
        max_seconds=args.draft_seconds,
    )
    report["draft"] = {
        **trained,
        "layers": drafter.config.num_hidden_layers,
        "target_layer_ids": drafter.config.target_layer_ids,
    }
    report["draft_parameters"] = sum(p.numel() for p in drafter.parameters())
    report["onpolicy"] = {
        "sequences": sum(d.tokens.shape[0] // 2 for d in data),
        "prompt_tokens": list(contexts),
        "new_tokens": preset.onpolicy_tokens,
        "resumed": args.resume_draft,
    }
    save_model(drafter, out / "draft")
    report["train_seconds"] = round(time.time() - started, 1)

    # τ on held-out prompts, from the saved (bf16) weights, at T = 0, in true fp32 (no TF32), so
    # the identical-to-ar column means what it says.
    torch.backends.cuda.matmul.allow_tf32 = False
    decoder = load_decoder(out / "target", out / "draft", device=str(device), dtype="float32", budget=128)
    configs = [("ar", 0), ("dflash", 0)] + [("ddtree", b) for b in (16, 32, 64, 128)]
    prompts = prompts_from(corpus.heldout, args.eval_prompts, 600)
    rows = run_bench(decoder, prompts, configs, max_tokens=128, warmup=False)
    report["eval"] = {
        r.label: {"tau": round(r.tau, 3), "identical_to_ar": f"{r.identical_to_ar}/{r.prompts}"} for r in rows
    }
    log("eval: " + ", ".join(f"{r.label} τ={r.tau:.2f}" for r in rows))
    report["eval_by_context"] = {}
    for context in args.eval_contexts:
        ids = context_prompts(corpus.heldout, tok, args.eval_prompts, context)
        rows = run_bench(decoder, ids, configs[1:], max_tokens=128, warmup=False, context=context)
        report["eval_by_context"][str(context)] = {r.label: round(r.tau, 3) for r in rows}
        log(f"eval at context {context}: " + ", ".join(f"{r.label} τ={r.tau:.2f}" for r in rows))
    (out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    write_card(out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
