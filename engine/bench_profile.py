"""`python -m engine bench --profile-kernels N`: where a round's time goes, kernel by kernel.

One generation per config under `torch.profiler`, reported per round: how many kernels a round
launches, their summed device time, and the N that take the most. On CUDA the stages run eagerly
for this (a replayed graph is one launch to the profiler; eager, its kernels are the same kernels
with the same durations, launched one by one). On the CPU the rows are PyTorch ops and their self
CPU time. A small model is latency-bound, so the launch count and the per-launch time are the
figures to move, and this is where they are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from engine.decode import Decoder
from engine.sampling import SamplingParams


@contextmanager
def eager_stages(decoder: Decoder) -> Iterator[None]:
    """Run the fast path's stages without replaying (or capturing) CUDA graphs."""
    graphs = decoder.fast.graphs if decoder.fast is not None else None
    if graphs is None:
        yield
        return
    saved, graphs.bypass = graphs.bypass, True
    try:
        yield
    finally:
        graphs.bypass = saved


def profile_kernels(
    decoder: Decoder, prompt: list[int], configs: list[tuple[str, int]], max_tokens: int, top: int
) -> list[dict[str, Any]]:
    cuda = decoder.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    report = []
    for alg, budget in configs:
        decoder.generate(prompt, params, algorithm=alg, budget=budget)  # lazy setup outside the profile
        with eager_stages(decoder), profile(activities=activities) as prof:
            g = decoder.generate(prompt, params, algorithm=alg, budget=budget)
        rounds = max(1, g.stats.rounds)
        rows = []
        for e in prof.key_averages():
            if cuda and e.device_type != DeviceType.CUDA:
                continue  # host-side ops: their kernels are the CUDA rows
            us = (e.self_device_time_total if cuda else e.self_cpu_time_total) / rounds
            if us > 0:
                rows.append({"name": e.key, "launches_per_round": e.count / rounds, "us_per_round": us})
        rows.sort(key=lambda r: -r["us_per_round"])
        report.append(
            {
                "label": f"ddtree B={budget}" if alg == "ddtree" else alg,
                "rounds": rounds,
                "launches_per_round": round(sum(r["launches_per_round"] for r in rows), 2),
                "us_per_round": round(sum(r["us_per_round"] for r in rows), 2),
                "top": rows[:top],
            }
        )
    return report


def format_profile(report: list[dict[str, Any]], unit: str) -> str:
    lines = []
    for entry in report:
        lines.append(
            f"{entry['label']}: {entry['launches_per_round']:.1f} {unit} per round, "
            f"{entry['us_per_round']:.1f} µs per round ({entry['rounds']} rounds)"
        )
        for r in entry["top"]:
            lines.append(f"  {r['us_per_round']:9.2f} µs  {r['launches_per_round']:6.2f}×  {r['name'][:90]}")
    return "\n".join(lines)
