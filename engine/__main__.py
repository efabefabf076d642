"""`python -m engine bench …` (in-process benchmark) and `python -m engine serve …` (the HTTP server)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
from typing import Any

import torch

from engine import __version__
from engine.bench import BenchRow, format_table, parse_configs, run_bench, write_json
from engine.bench_baseline import divergences, hf_generate
from engine.bench_profile import format_profile, profile_kernels
from engine.bench_prompts import context_prompts
from engine.decode import Decoder
from engine.runtime import MODELS_DIR, load_decoder
from engine.server.cli import add_parser as add_serve_parser
from engine.server.cli import serve
from engine.training.corpus import load_heldout, prompts_from


@functools.cache  # read once per process: the bench prints it and writes it to the JSON
def host_cpu() -> str:
    """The host's CPU model and core count: the transformers baseline runs Python per token, so its
    speed (and every ratio to it) follows the host as much as the GPU."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model or 'unknown CPU'} ({os.cpu_count()} cores)"


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_bench_parser(sub: Any) -> None:
    b = sub.add_parser("bench", help="tokens/s, τ and per-stage time of ar / dflash / ddtree on held-out prompts")
    b.add_argument("--model", default=str(MODELS_DIR / "small" / "target"))
    b.add_argument("--draft", default=str(MODELS_DIR / "small" / "draft"))
    b.add_argument("--algorithms", default="ar,dflash,ddtree")
    b.add_argument("--budgets", type=_ints, default=[16, 32, 64, 128])
    b.add_argument("--prompts", type=int, default=8)
    b.add_argument("--prompt-chars", type=int, default=600, help="prompt length when --contexts is not given")
    b.add_argument("--contexts", type=_ints, default=[], help="prompt lengths in tokens, e.g. 64,1024,3072")
    b.add_argument("--max-tokens", type=int, default=200)
    b.add_argument("--lengths", type=_ints, default=[], help="output-length check, e.g. 200,600,1200")
    b.add_argument("--length-context", type=int, default=1024)
    b.add_argument("--length-budget", type=int, default=64)
    b.add_argument("--hf-baseline", type=int, default=0, metavar="PROMPTS", help="transformers generate baseline")
    b.add_argument("--hf-tokens", type=int, default=128)
    b.add_argument("--hf-repeats", type=int, default=1, help="timed passes of the baseline (median reported)")
    b.add_argument(
        "--lookup", type=int, default=0, metavar="N",
        help="ddtree's context-lookup branch: n-gram order (0: none; engine/tree.py)",
    )  # fmt: skip
    b.add_argument(
        "--lookup-tokens", type=int, default=None, metavar="L",
        help="the lookup branch's length, 1..63 (default 31)",
    )  # fmt: skip
    b.add_argument("--temperature", type=float, default=0.0)
    b.add_argument("--warmup", choices=["auto", "short", "full"], default="auto")
    b.add_argument("--device", default="auto")
    b.add_argument("--dtype", default="auto")
    b.add_argument(
        "--profile-kernels", type=int, default=0, metavar="N",
        help="also profile one generation per config: kernels per round and the N slowest",
    )  # fmt: skip
    b.add_argument("--json", dest="json_path", help="also write the results here")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    add_serve_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return bench(args)


def bench(args: argparse.Namespace) -> int:
    algorithms = [a for a in args.algorithms.split(",") if a]
    try:
        if args.profile_kernels < 0:
            raise ValueError(f"--profile-kernels must be >= 0, got {args.profile_kernels}")
        if args.hf_repeats < 1:
            raise ValueError(f"--hf-repeats must be >= 1, got {args.hf_repeats}")
        longest = max([*args.contexts, args.length_context if args.lengths else 0, 1])
        need = longest + max([args.max_tokens, *args.lengths]) + 64
        decoder = load_decoder(
            args.model,
            args.draft,
            device=args.device,
            dtype=args.dtype,
            budget=max(args.budgets or [1]),
            max_context=need if args.contexts else None,
            lookup=args.lookup,
            lookup_tokens=args.lookup_tokens,
        )
        configs = parse_configs(algorithms, args.budgets)
        for alg, budget in configs:
            decoder.check(alg, budget if alg == "ddtree" else 1)
        heldout = load_heldout()
        if args.contexts:
            prompt_sets = {c: context_prompts(heldout, decoder.tokenizer, args.prompts, c) for c in args.contexts}
        else:
            texts = prompts_from(heldout, args.prompts, args.prompt_chars)
            prompt_sets = {None: [decoder.tokenizer.encode(t) for t in texts]}
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    warmup = args.warmup
    if warmup == "auto":
        warmup = "full" if decoder.fast is not None and decoder.device.type == "cuda" else "short"

    rows: list[BenchRow] = []
    first_outputs: dict[tuple[str, int], list[list[int]]] = {}
    for context, prompts in prompt_sets.items():
        outputs: dict[tuple[str, int], list[list[int]]] = {}
        part = run_bench(
            decoder,
            prompts,
            configs,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            warmup=warmup,
            context=context,
            outputs=outputs,
        )
        _report_divergences(decoder, prompts, part, outputs)
        first_outputs = first_outputs or outputs
        rows += part
        print(format_table(part), flush=True)

    length_rows = _length_check(decoder, args, warmup)
    extra: dict[str, Any] = {"length_check": [r.to_dict() for r in length_rows]}
    if args.hf_baseline:
        first_context, first_prompts = next(iter(prompt_sets.items()))
        hf = hf_generate(
            args.model,
            first_prompts[: args.hf_baseline],
            args.hf_tokens,
            str(decoder.device),
            decoder.dtype,
            repeats=args.hf_repeats,
        )
        ours = next((r for r in rows if r.algorithm == "ar" and r.context == first_context), None)
        ar_outputs = first_outputs.get(("ar", 0), [])
        hf["identical_to_ar_prefix"] = sum(a[: len(h)] == h for a, h in zip(ar_outputs, hf["outputs"], strict=False))
        hf["context"] = first_context
        hf["our_ar_tokens_per_second"] = ours.tokens_per_second if ours else None
        extra["hf_baseline"] = {k: v for k, v in hf.items() if k != "outputs"}
        speedup = hf["our_ar_tokens_per_second"] / hf["tokens_per_second"] if ours and hf["tokens_per_second"] else 0
        runs = ", ".join(f"{r:.1f}" for r in hf["tokens_per_second_runs"])
        print(
            f"transformers generate: {hf['tokens_per_second']:.1f} tok/s (median of {hf['repeats']}: {runs};"
            f" {hf['prompts']} prompts x {hf['max_tokens']} tokens, context {first_context});"
            f" our ar: {hf['our_ar_tokens_per_second'] or 0:.1f} tok/s"
            f" = {speedup:.0f}x; same first tokens as our ar: {hf['identical_to_ar_prefix']}/{hf['prompts']};"
            f" host CPU: {host_cpu()}"
        )
    if args.profile_kernels > 0:
        first_prompt = next(iter(prompt_sets.values()))[0]
        profiled = profile_kernels(decoder, first_prompt, configs, args.max_tokens, args.profile_kernels)
        unit = "kernels" if decoder.device.type == "cuda" else "op calls (nested ones too)"
        print(format_profile(profiled, unit), flush=True)
        extra["kernel_profile"] = profiled
    if args.json_path:
        meta = {
            "engine_version": __version__,
            "model": args.model,
            "draft": args.draft,
            "device": str(decoder.device),
            "device_name": torch.cuda.get_device_name() if decoder.device.type == "cuda" else platform.processor(),
            "dtype": str(decoder.dtype).removeprefix("torch."),
            "fast_path": decoder.fast is not None,
            "cuda_graphs": bool(decoder.fast and decoder.fast.graphs.enabled),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "host_cpu": host_cpu(),
            "prompts": args.prompts,
            "contexts": args.contexts,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "block_size": decoder.block_size,
            "argv": sys.argv[1:],
        }
        write_json(args.json_path, rows, meta, extra)
        print(json.dumps({"written": args.json_path}))
    return 0


def _report_divergences(
    decoder: Decoder, prompts: list[list[int]], rows: list[BenchRow], outputs: dict[tuple[str, int], list[list[int]]]
) -> None:
    ar = outputs.get(("ar", 0))
    if ar is None:
        return
    for row in rows:
        if row.algorithm != "ar":
            row.divergences = divergences(decoder, prompts, ar, outputs[(row.algorithm, row.budget)])
            for d in row.divergences:
                print(
                    f"  {row.label} ctx {row.context}: prompt {d['prompt']} differs from ar at token"
                    f" {d['position']}; top-1/top-2 logit gap there {d['gap']:.4f}"
                )


def _length_check(decoder: Decoder, args: argparse.Namespace, warmup: str) -> list[BenchRow]:
    """tok/s at one context for several output lengths: it should not fall with the length."""
    if not args.lengths:
        return []
    prompts = context_prompts(load_heldout(), decoder.tokenizer, args.prompts, args.length_context)
    configs = [("ar", 0), ("dflash", 0), ("ddtree", args.length_budget)]
    rows: list[BenchRow] = []
    for n in args.lengths:
        rows += run_bench(decoder, prompts, configs, max_tokens=n, warmup=warmup, context=args.length_context)
    print(f"output-length check at context {args.length_context}:")
    for alg, budget in configs:
        picked = [r for r in rows if (r.algorithm, r.budget) == (alg, budget)]
        speeds = [r.tokens_per_second for r in picked]
        spread = (max(speeds) - min(speeds)) / max(speeds) if speeds and max(speeds) else 0.0
        print(
            f"  {picked[0].label:<14}"
            + "".join(f"{r.max_tokens:>6}: {r.tokens_per_second:>9.1f}" for r in picked)
            + f"   spread {spread:.1%}"
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
