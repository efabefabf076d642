"""`python -m engine bench`: tokens/s, τ and per-stage time for ar / dflash / ddtree(B).

In-process (no HTTP), T = 0 by default, held-out code prompts from the standard library of the
interpreter running it, optionally cut to exact context lengths (`engine.bench_prompts`). Not a
test: it prints tables and writes JSON. `engine.bench_baseline` adds the Hugging Face
`transformers` baseline and the divergence report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.decode import Decoder, Generation
from engine.sampling import SamplingParams
from engine.stats import STAGES

FORWARD_STAGES = ("draft", "verify")  # the two forward passes of a round (LM heads included)


@dataclass
class BenchRow:
    algorithm: str
    budget: int
    context: int | None = None  # prompt tokens when prompts are cut to a length
    max_tokens: int = 0
    prompts: int = 0
    tokens: int = 0
    rounds: int = 0
    decode_seconds: float = 0.0
    prefill_seconds: float = 0.0
    committed: int = 0
    histogram: list[int] = field(default_factory=list)
    accepted_per_depth: list[int] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    identical_to_ar: int = 0
    divergences: list[dict[str, Any]] = field(default_factory=list)  # filled by bench_baseline
    lookup: int = 0  # ddtree's context-lookup n-gram order (0: none)
    lookup_tokens: int = 0  # and its branch's length

    @property
    def label(self) -> str:
        if self.algorithm != "ddtree":
            return self.algorithm
        if self.lookup:
            return f"ddtree+lookup{self.lookup}:{self.lookup_tokens} B={self.budget}"
        return f"ddtree B={self.budget}"

    @property
    def tau(self) -> float:
        return self.committed / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.decode_seconds if self.decode_seconds else 0.0

    @property
    def round_seconds(self) -> float:
        return self.decode_seconds / self.rounds if self.rounds else 0.0

    @property
    def outside_share(self) -> float:
        """Share of a round's wall time spent outside the forward passes (tree, walk, commit, host)."""
        if not self.decode_seconds:
            return 0.0
        forward = sum(self.stage_seconds[s] for s in FORWARD_STAGES)
        return max(0.0, 1.0 - forward / self.decode_seconds)

    def to_dict(self) -> dict[str, Any]:
        per_round = {k: (v / self.rounds if self.rounds else 0.0) for k, v in self.stage_seconds.items()}
        return {
            "algorithm": self.algorithm,
            "budget": self.budget,
            "lookup": self.lookup,
            "lookup_tokens": self.lookup_tokens,
            "context": self.context,
            "max_tokens": self.max_tokens,
            "prompts": self.prompts,
            "tokens": self.tokens,
            "rounds": self.rounds,
            "tau": round(self.tau, 4),
            "tokens_per_second": round(self.tokens_per_second, 2),
            "decode_seconds": self.decode_seconds,
            "prefill_seconds": self.prefill_seconds,
            "round_seconds": self.round_seconds,
            "outside_forward_share": round(self.outside_share, 4),
            "accept_length_histogram": self.histogram,
            "accepted_per_depth": self.accepted_per_depth,
            "stage_seconds_per_round": per_round,
            "identical_to_ar": self.identical_to_ar,
            "divergences": self.divergences,
        }


def parse_configs(algorithms: list[str], budgets: list[int]) -> list[tuple[str, int]]:
    configs: list[tuple[str, int]] = []
    for alg in algorithms:
        if alg == "ddtree":
            configs += [("ddtree", b) for b in budgets]
        else:
            configs.append((alg, 0))
    return configs


def run_bench(
    decoder: Decoder,
    prompts: list[list[int]] | list[str],
    configs: list[tuple[str, int]],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    warmup: str | bool = "short",
    context: int | None = None,
    outputs: dict[tuple[str, int], list[list[int]]] | None = None,
) -> list[BenchRow]:
    """Every config on every prompt (text or token ids); `ar` runs first when listed, to count identical outputs.

    warmup: "short" (8 tokens per config), "full" (the whole workload once, untimed: on the GPU
    this captures every CUDA graph the timed pass will replay) or False. `outputs`, when given,
    receives each config's token lists (for the divergence report).
    """
    prompts = [decoder.tokenizer.encode(p) if isinstance(p, str) else p for p in prompts]
    if prompts and warmup in ("short", "full"):
        for alg, budget in configs:
            for prompt in prompts if warmup == "full" else prompts[:1]:
                n = max_tokens if warmup == "full" else 8
                decoder.generate(prompt, SamplingParams(max_tokens=n, ignore_eos=True), algorithm=alg, budget=budget)
    reference: dict[int, list[int]] = {}
    rows = []
    for alg, budget in configs:
        row = BenchRow(alg, budget, context, max_tokens)
        if alg == "ddtree" and decoder.lookup:
            row.lookup, row.lookup_tokens = decoder.lookup, decoder.lookup_tokens
        for i, prompt in enumerate(prompts):
            params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=i, ignore_eos=True)
            g = decoder.generate(prompt, params, algorithm=alg, budget=budget)
            _add_generation(row, g)
            if outputs is not None:
                outputs.setdefault((alg, budget), []).append(g.tokens)
            if alg == "ar":
                reference[i] = g.tokens
            elif reference.get(i) == g.tokens:
                row.identical_to_ar += 1
        rows.append(row)
    return rows


def _add_generation(row: BenchRow, g: Generation) -> None:
    s = g.stats
    row.prompts += 1
    row.tokens += len(g.tokens)
    row.rounds += s.rounds
    row.committed += sum(s.accept_lengths)
    row.decode_seconds += s.decode_seconds
    row.prefill_seconds += s.prefill_seconds
    row.histogram = _add(row.histogram, s.histogram())
    row.accepted_per_depth = _add(row.accepted_per_depth, s.accepted_per_depth)
    for k, v in s.stage_seconds.items():
        row.stage_seconds[k] += v


def _add(total: list[int], more: list[int]) -> list[int]:
    return [a + b for a, b in zip(total or [0] * len(more), more, strict=True)]


def format_table(rows: list[BenchRow]) -> str:
    head = (
        f"{'ctx':>6} {'algorithm':<14}{'tok/s':>9}{'x ar':>7}{'tau':>7}{'rounds':>8}{'round ms':>10}"
        + "".join(f"{s + ' ms':>14}" for s in STAGES)
        + f"{'outside':>9}{'=ar':>7}"
    )
    lines = [head, "-" * len(head)]
    ar_speed: dict[int | None, float] = {r.context: r.tokens_per_second for r in rows if r.algorithm == "ar"}
    for r in rows:
        per = r.to_dict()["stage_seconds_per_round"]
        same = "" if r.algorithm == "ar" else f"{r.identical_to_ar}/{r.prompts}"
        base = ar_speed.get(r.context)
        ratio = f"{r.tokens_per_second / base:.2f}" if base else ""
        lines.append(
            f"{r.context if r.context is not None else '-':>6} {r.label:<14}{r.tokens_per_second:>9.1f}{ratio:>7}"
            f"{r.tau:>7.2f}{r.rounds:>8}{r.round_seconds * 1e3:>10.3f}"
            + "".join(f"{per[s] * 1e3:>14.3f}" for s in STAGES)
            + f"{r.outside_share:>9.1%}{same:>7}"
        )
    return "\n".join(lines)


def write_json(
    path: str | Path, rows: list[BenchRow], meta: dict[str, Any], extra: dict[str, Any] | None = None
) -> None:
    doc = {"meta": meta, "results": [r.to_dict() for r in rows], **(extra or {})}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")
