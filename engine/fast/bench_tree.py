"""Micro-benchmark: the round's tree build (log-softmax, top-K, best-first tree, ancestor mask).

    python -m engine.fast.bench_tree --device cuda [--budgets 16,32,64,128,256] [--iters 200]

One build from the drafter's logits for L = 15 depths over a 4096-token vocabulary (the `small`
pair's shape), per budget B, in microseconds per build:
- torch graph: `tree_ops.build_tree` (the CPU path and the reference) captured in a CUDA graph;
- triton graph: `tree_triton.TritonTree.build`, what the fast path replays on CUDA, also captured.
`same tree` says whether the two builds gave the same nodes in the same order (float32 and float64
scores can swap near-tied nodes). On CPU only the PyTorch build is timed, eagerly. The `tree_build` column of
`python -m engine bench` is this stage inside a real round.
"""

from __future__ import annotations

import argparse

import torch

from engine.fast import tree_ops
from engine.kernels.bench_tree_attention import time_eager, time_graph
from engine.kernels.tree_attention import triton_available

DEPTHS, VOCAB = 15, 4096


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m engine.fast.bench_tree",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--budgets", default="16,32,64,128,256", help="tree sizes B")
    parser.add_argument("--iters", type=int, default=None, help="builds per figure (default 200 cuda, 5 cpu)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    iters = args.iters or (200 if cuda else 5)
    kernel = cuda and triton_available()
    print(f"device {device}, {DEPTHS} depths x {VOCAB} ids, {iters} builds per figure; µs per build")
    print(" | ".join(["B", "torch eager" if not cuda else "torch graph", "triton graph", "same tree"]))
    for b in [int(x) for x in args.budgets.split(",")]:
        logits = torch.randn(DEPTHS, VOCAB, generator=torch.Generator().manual_seed(b)).mul(3).to(device)
        root = torch.tensor([1], device=device)
        plan = tree_ops.TreePlan(b, b, DEPTHS, device)

        def torch_build(plan=plan, logits=logits, root=root) -> tree_ops.DeviceTree:
            top = torch.log_softmax(logits, -1).topk(plan.k)
            return tree_ops.build_tree(plan, root, top.indices, top.values)

        row = [str(b), f"{(time_graph if cuda else time_eager)(torch_build, iters, device):.1f}"]
        if kernel:
            from engine.fast.tree_triton import TritonTree

            tree = TritonTree(plan, VOCAB, device)

            def triton_build(tree=tree, logits=logits, root=root) -> tree_ops.DeviceTree:
                return tree.build(root, logits)

            row.append(f"{time_graph(triton_build, iters, device):.1f}")
            want, got = torch_build(), triton_build()
            fields = ("tokens", "parents", "depths")
            row.append(str(all(torch.equal(getattr(want, f), getattr(got, f)) for f in fields)))
        else:
            row += ["-", "-"]
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
