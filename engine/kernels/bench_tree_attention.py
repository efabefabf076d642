"""Micro-benchmark: the tree-attention kernel against SDPA with a dense bool mask (the model's current call).

    python -m engine.kernels.bench_tree_attention --device cuda [--dtype bfloat16] [--iters 200]

One attention call of one layer, the `small` model's heads (6 query heads over 2 KV heads, head_dim 64),
batch 1, T = 1 + B queries (B tree nodes plus the root) over `past` cached rows plus the tree. Per-call
times in microseconds:
- eager: back-to-back calls, so launch overhead counts (the kernel launch plus its Python);
- graph: the calls captured in one CUDA graph and replayed, so only device time counts, as in the
  engine's captured verify pass. The kernel gets the mask packed once (per round, shared by the layers)
  and SDPA the dense [T, past + T] mask built once, as the decoder does.
`max |diff|` is the largest difference between the two outputs. On CPU only SDPA is timed (the kernel
needs a GPU; its CPU path is SDPA itself), in a few quick calls.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from engine.config import TargetConfig
from engine.kernels.tree_attention import pack_tree_mask, tree_attention, triton_available
from engine.runtime import MODELS_DIR
from engine.tree import visibility


def random_parents(b: int, rng: np.random.Generator) -> list[int]:
    """A bushy random tree of 1 + b nodes (parents[i] < i), like a best-first DDTree's shape."""
    return [-1] + [int(rng.integers(max(0, i - 8), i)) for i in range(1, b + 1)]


def time_eager(fn: Callable[[], object], iters: int, device: torch.device) -> float:
    """Microseconds per call of back-to-back calls."""
    for _ in range(3):
        fn()
    if device.type != "cuda":
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - start) / iters * 1e6
    torch.cuda.synchronize(device)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize(device)
    return begin.elapsed_time(end) / iters * 1e3


def time_graph(fn: Callable[[], object], iters: int, device: torch.device, per_graph: int = 20) -> float:
    """Microseconds per call when `per_graph` calls are captured in one CUDA graph and replayed."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    replays = max(1, iters // per_graph)
    graph.replay()
    torch.cuda.synchronize(device)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize(device)
    return begin.elapsed_time(end) / (replays * per_graph) * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m engine.kernels.bench_tree_attention",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--budgets", default="16,32,64,128,256", help="tree sizes B (T = 1 + B queries)")
    parser.add_argument("--contexts", default="64,1024,3072", help="past lengths")
    parser.add_argument("--iters", type=int, default=None, help="calls per measurement (default 200 cuda, 5 cpu)")
    parser.add_argument(
        "--config", default="", help="kernel launch overrides for every row, e.g. BLOCK_M=32,BLOCK_N=64,SPLITS=4"
    )
    parser.add_argument("--model", default=str(MODELS_DIR / "small" / "target"), help="config.json for the heads")
    args = parser.parse_args(argv)
    overrides = {key: int(value) for key, value in (item.split("=") for item in args.config.split(",") if item)}

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype) if device.type == "cuda" else torch.float32
    iters = args.iters or (200 if device.type == "cuda" else 5)
    cfg = TargetConfig.load(args.model)
    heads, kv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    kernel = device.type == "cuda" and triton_available()
    rng = np.random.default_rng(0)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), {dtype}, "
          f"heads {heads}/{kv} kv, head_dim {hd}, batch 1, {iters} calls per figure, kernel overrides {overrides}; "
          f"times in µs per call")  # fmt: skip
    columns = ["B", "T", "past", "sdpa eager", "kernel eager", "sdpa graph", "kernel graph", "graph speedup"]
    print(" | ".join([*columns, "max |diff|"]))
    for past in [int(x) for x in args.contexts.split(",")]:
        for b in [int(x) for x in args.budgets.split(",")]:
            t = 1 + b
            q = torch.randn(1, t, heads, hd, device=device, dtype=dtype)
            k = torch.randn(1, past + t, kv, hd, device=device, dtype=dtype)
            v = torch.randn_like(k)
            tree = torch.from_numpy(visibility(random_parents(b, rng))).to(device)
            dense = torch.cat([torch.ones(t, past, dtype=torch.bool, device=device), tree], dim=1)
            packed = pack_tree_mask(tree)

            def sdpa(q=q, k=k, v=v, dense=dense):
                return F.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=dense, enable_gqa=kv != heads
                ).transpose(1, 2)

            def fused(q=q, k=k, v=v, past=past, packed=packed):
                return tree_attention(q, k, v, past, packed, impl="triton", config=overrides)

            row = [str(b), str(t), str(past), f"{time_eager(sdpa, iters, device):.1f}"]
            if kernel:
                diff = (fused().float() - sdpa().float()).abs().max().item()
                sdpa_graph, fused_graph = time_graph(sdpa, iters, device), time_graph(fused, iters, device)
                row += [f"{time_eager(fused, iters, device):.1f}", f"{sdpa_graph:.1f}", f"{fused_graph:.1f}"]
                row += [f"{sdpa_graph / fused_graph:.2f}x", f"{diff:.2e}"]
            else:
                row += ["-"] * 5
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
