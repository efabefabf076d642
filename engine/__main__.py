"""`python -m engine bench …` (in-process benchmark) and `python -m engine serve …` (the HTTP server)."""

from __future__ import annotations

import argparse
import json
import platform
import sys

import torch

from engine import __version__
from engine.bench import format_table, parse_configs, run_bench, write_json
from engine.runtime import MODELS_DIR, load_decoder
from engine.server.cli import add_parser as add_serve_parser
from engine.server.cli import serve
from engine.training.corpus import load_heldout, prompts_from


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="tokens/s, τ and per-stage time of ar / dflash / ddtree on held-out prompts")
    b.add_argument("--model", default=str(MODELS_DIR / "small" / "target"))
    b.add_argument("--draft", default=str(MODELS_DIR / "small" / "draft"))
    b.add_argument("--algorithms", default="ar,dflash,ddtree")
    b.add_argument("--budgets", type=_ints, default=[16, 32, 64, 128])
    b.add_argument("--prompts", type=int, default=8)
    b.add_argument("--prompt-chars", type=int, default=600)
    b.add_argument("--max-tokens", type=int, default=200)
    b.add_argument("--temperature", type=float, default=0.0)
    b.add_argument("--device", default="auto")
    b.add_argument("--dtype", default="auto")
    b.add_argument("--json", dest="json_path", help="also write the results here")
    add_serve_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args)

    algorithms = [a for a in args.algorithms.split(",") if a]
    try:
        decoder = load_decoder(
            args.model, args.draft, device=args.device, dtype=args.dtype, budget=max(args.budgets or [1])
        )
        configs = parse_configs(algorithms, args.budgets)
        for alg, budget in configs:
            decoder.check(alg, budget if alg == "ddtree" else 1)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    prompts = prompts_from(load_heldout(), args.prompts, args.prompt_chars)
    rows = run_bench(decoder, prompts, configs, max_tokens=args.max_tokens, temperature=args.temperature)
    print(format_table(rows))
    if args.json_path:
        meta = {
            "engine_version": __version__,
            "model": args.model,
            "draft": args.draft,
            "device": str(decoder.device),
            "dtype": str(decoder.dtype).removeprefix("torch."),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "prompts": len(prompts),
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "block_size": decoder.block_size,
        }
        write_json(args.json_path, rows, meta)
        print(json.dumps({"written": args.json_path}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
