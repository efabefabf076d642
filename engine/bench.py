"""`python -m engine bench`: tokens/s, τ and per-stage time for ar / dflash / ddtree(B).

In-process (no HTTP), T = 0 by default, held-out code prompts from the standard library of the
interpreter running it. Not a test: it prints a table and writes JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.decode import Decoder
from engine.sampling import SamplingParams
from engine.stats import STAGES


@dataclass
class BenchRow:
    algorithm: str
    budget: int
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

    @property
    def label(self) -> str:
        return f"ddtree B={self.budget}" if self.algorithm == "ddtree" else self.algorithm

    @property
    def tau(self) -> float:
        return self.committed / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.decode_seconds if self.decode_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        per_round = {k: (v / self.rounds if self.rounds else 0.0) for k, v in self.stage_seconds.items()}
        return {
            "algorithm": self.algorithm,
            "budget": self.budget,
            "prompts": self.prompts,
            "tokens": self.tokens,
            "rounds": self.rounds,
            "tau": round(self.tau, 4),
            "tokens_per_second": round(self.tokens_per_second, 2),
            "decode_seconds": self.decode_seconds,
            "prefill_seconds": self.prefill_seconds,
            "accept_length_histogram": self.histogram,
            "accepted_per_depth": self.accepted_per_depth,
            "stage_seconds_per_round": per_round,
            "identical_to_ar": self.identical_to_ar,
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
    prompts: list[str],
    configs: list[tuple[str, int]],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    warmup: bool = True,
) -> list[BenchRow]:
    """Every config on every prompt; `ar` runs first when listed, to count identical outputs."""
    if warmup and prompts:
        for alg, budget in configs:
            decoder.generate_text(
                prompts[0], SamplingParams(max_tokens=8, ignore_eos=True), algorithm=alg, budget=budget
            )
    reference: dict[int, list[int]] = {}
    rows = []
    for alg, budget in configs:
        row = BenchRow(alg, budget)
        for i, prompt in enumerate(prompts):
            params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=i, ignore_eos=True)
            g = decoder.generate_text(prompt, params, algorithm=alg, budget=budget)
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
            if alg == "ar":
                reference[i] = g.tokens
            elif reference.get(i) == g.tokens:
                row.identical_to_ar += 1
        rows.append(row)
    return rows


def _add(total: list[int], more: list[int]) -> list[int]:
    return [a + b for a, b in zip(total or [0] * len(more), more, strict=True)]


def format_table(rows: list[BenchRow]) -> str:
    head = (
        f"{'algorithm':<14}{'tok/s':>9}{'tau':>7}{'rounds':>8}"
        + "".join(f"{s + ' ms':>14}" for s in STAGES)
        + f"{'=ar':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        per = r.to_dict()["stage_seconds_per_round"]
        same = "" if r.algorithm == "ar" else f"{r.identical_to_ar}/{r.prompts}"
        lines.append(
            f"{r.label:<14}{r.tokens_per_second:>9.1f}{r.tau:>7.2f}{r.rounds:>8}"
            + "".join(f"{per[s] * 1e3:>14.3f}" for s in STAGES)
            + f"{same:>6}"
        )
    return "\n".join(lines)


def write_json(path: str | Path, rows: list[BenchRow], meta: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps({"meta": meta, "results": [r.to_dict() for r in rows]}, indent=2) + "\n")
