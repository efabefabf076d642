"""engine.kernels.tree_attention against the PyTorch reference (SDPA with a dense [T, past + T] mask).

Without a GPU the Triton kernel itself runs under Triton's interpreter (TRITON_INTERPRET=1). Triton reads
that variable when it wraps a function with `triton.jit`, and wraps its own library functions (tl.max,
tl.sum, ...) when `triton` is first imported; setting it later in a process that has already imported
triton leaves those compiled-mode wrappers in place and the interpreter fails. A pytest process cannot
promise that nothing imported triton before this module, and setting the variable here would leak into
every later test (the CUDA tests below must run the compiled kernel). So `test_triton_interpreter_suite`
runs the `test_interpreted_*` tests in a child pytest whose environment has TRITON_INTERPRET=1 from the
start; in the parent they are skipped. Run them directly with
`TRITON_INTERPRET=1 python -m pytest tests/engine/test_tree_attention.py -k interpreted`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.kernels import pack_tree_mask, reference, tree_attention
from engine.kernels.tree_attention import launch_config, triton_available, unpack_tree_mask
from engine.tree import visibility

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
interpreted = pytest.mark.skipif(
    not (INTERPRETING and triton_available()), reason="run by test_triton_interpreter_suite in a child process"
)
needs_cuda = pytest.mark.skipif(
    INTERPRETING or not (torch.cuda.is_available() and triton_available()), reason="needs CUDA + triton, compiled"
)


@pytest.mark.skipif(INTERPRETING or not triton_available(), reason="the child process itself, or no triton")
def test_triton_interpreter_suite():
    """Runs every test_interpreted_* test on CPU in a child pytest started with TRITON_INTERPRET=1."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "interpreted"]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([*command, __file__], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    report = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    expected = len(CASES) + 7  # + gpu tiles, 2 splits, tensor past, mask control, 2 without a mask
    assert re.search(rf"\b{expected} passed\b", proc.stdout) and "skipped" not in proc.stdout, report


def random_tree_mask(t: int, seed: int) -> torch.Tensor:
    """Ancestor mask of a random tree: parents[i] < i, as the heap's pop order guarantees."""
    rng = np.random.default_rng(seed)
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, t)]
    return torch.from_numpy(visibility(parents))


def inputs(n: int, t: int, past: int, heads: int, kv: int, hd: int, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(n, t, heads, hd, generator=g).to(device, dtype)
    k = torch.randn(n, past + t, kv, hd, generator=g).to(device, dtype)
    v = torch.randn(n, past + t, kv, hd, generator=g).to(device, dtype)
    return q, k, v, random_tree_mask(t, seed).to(device)


# Every T in {1, 2, 17, 64, 129, 257} and every past in {0, 1, 63, 1000}, GQA (H > KV) and not; head_dim 16
# keeps the interpreter quick, and one case has the `small` model's heads (6 over 2, head_dim 64).
CASES = [
    # n, T, past, H, KV, hd
    (1, 1, 0, 2, 2, 16),
    (1, 1, 1000, 4, 2, 16),
    (2, 2, 1, 4, 1, 16),
    (1, 2, 63, 2, 2, 16),
    (1, 17, 0, 4, 2, 16),
    (1, 17, 63, 6, 2, 64),
    (1, 17, 1000, 2, 2, 16),
    (1, 64, 1, 2, 2, 16),
    (1, 64, 63, 4, 2, 16),
    (1, 129, 0, 2, 2, 16),
    (1, 129, 1000, 2, 1, 16),
    (1, 257, 1, 2, 1, 16),
    (1, 257, 63, 2, 2, 16),
]


@interpreted
@pytest.mark.parametrize(("n", "t", "past", "heads", "kv", "hd"), CASES)
def test_interpreted_kernel_matches_reference(n, t, past, heads, kv, hd):
    q, k, v, mask = inputs(n, t, past, heads, kv, hd, seed=t + past)
    expected = reference(q, k, v, past, mask)
    got = tree_attention(q, k, v, past, mask, impl="triton")
    assert got.shape == (n, t, heads, hd) and got.dtype == q.dtype
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@interpreted
def test_interpreted_gpu_tiles():
    """The GPU's own tile sizes: many row and key blocks, the past/tree border inside a key block."""
    q, k, v, mask = inputs(1, 17, 63, 6, 2, 64, seed=4)
    got = tree_attention(q, k, v, 63, mask, impl="triton", config={"BLOCK_M": 16, "BLOCK_N": 32})
    torch.testing.assert_close(got, reference(q, k, v, 63, mask), rtol=1e-5, atol=1e-5)


@interpreted
@pytest.mark.parametrize("splits", [2, 5])
def test_interpreted_split_keys_merge_exactly(splits):
    """The flash-decoding split (chosen on GPUs when row blocks are few) merges to the same result."""
    q, k, v, mask = inputs(1, 33, 150, 4, 2, 16, seed=splits)
    got = tree_attention(q, k, v, 150, mask, impl="triton", config={"SPLITS": splits, "BLOCK_N": 32})
    torch.testing.assert_close(got, reference(q, k, v, 150, mask), rtol=1e-5, atol=1e-5)


@interpreted
def test_interpreted_tensor_past_packed_mask_and_cache_view():
    """The CUDA-graph form: past as a 0-dim tensor, k/v views of a larger static cache, mask packed once."""
    t, capacity = 40, 200
    q, _, _, mask = inputs(1, t, 0, 4, 2, 16, seed=3)
    cache = torch.randn(2, 1, capacity + 7, 2, 16)
    k, v = cache[0, :, :capacity], cache[1, :, :capacity]  # rows past past + T hold junk and must be ignored
    packed = pack_tree_mask(mask)
    for past in (0, 50, capacity - t):
        got = tree_attention(q, k, v, torch.tensor(past), packed, impl="triton")
        torch.testing.assert_close(got, reference(q, k, v, past, mask), rtol=1e-5, atol=1e-5)


@interpreted
def test_interpreted_mask_matters():
    """A negative control: the kernel's output changes when one ancestor link is dropped from the mask."""
    q, k, v, _ = inputs(1, 9, 5, 2, 2, 16, seed=1)
    chain = torch.ones(9, 9, dtype=torch.bool).tril()
    broken = chain.clone()
    broken[8, 4] = False
    a = tree_attention(q, k, v, 5, chain, impl="triton")
    b = tree_attention(q, k, v, 5, broken, impl="triton")
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert (a[:, 8] - b[:, 8]).abs().max() > 1e-3


@interpreted
@pytest.mark.parametrize("splits", [1, 3])
def test_interpreted_no_mask_sees_exactly_the_past(splits):
    """tree_mask=None: every query sees rows [0, past) and nothing after (the kernel's tree loop is compiled
    out), as with an all-false tree mask — for an int past and a device-tensor past."""
    q, k, v, _ = inputs(1, 6, 70, 4, 2, 16, seed=splits)
    expected = reference(q, k, v, 70, torch.zeros(6, 6, dtype=torch.bool))
    for past in (70, torch.tensor(70)):
        got = tree_attention(q, k, v, past, None, impl="triton", config={"SPLITS": splits, "BLOCK_N": 32})
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(tree_attention(q, k, v, 70, None, impl="torch"), expected)


def test_pack_round_trip_every_bit():
    for t in (1, 31, 32, 33, 64, 257):
        mask = random_tree_mask(t, t) | (torch.rand(t, t) < 0.5)  # also fills bit 31 (the int32 sign bit)
        packed = pack_tree_mask(mask)
        assert packed.dtype == torch.int32 and packed.shape == (t, -(-t // 32))
        assert torch.equal(unpack_tree_mask(packed, t), mask)


def test_cpu_default_is_reference_and_handles_tensor_past():
    q, k, v, mask = inputs(1, 17, 63, 4, 2, 16)
    expected = reference(q, k, v, 63, mask)
    assert torch.equal(tree_attention(q, k, v, 63, mask), expected)
    assert torch.equal(tree_attention(q, k, v, torch.tensor(63), pack_tree_mask(mask)), expected)


def test_reference_is_the_models_dense_mask_attention():
    """The reference is SDPA over past + tree with the dense mask, the same call as Attention.attend."""
    q, k, v, mask = inputs(1, 5, 3, 2, 2, 8)
    scores = torch.einsum("nthd,nshd->nhts", q, k) / 8**0.5
    dense = torch.cat([torch.ones(5, 3, dtype=torch.bool), mask], dim=1)
    expected = torch.einsum("nhts,nshd->nthd", scores.masked_fill(~dense, float("-inf")).softmax(-1), v)
    torch.testing.assert_close(reference(q, k, v, 3, mask), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(INTERPRETING or not triton_available(), reason="needs triton, not interpreting")
def test_triton_on_cpu_without_interpreter_is_refused(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    q, k, v, mask = inputs(1, 3, 2, 2, 2, 16)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        tree_attention(q, k, v, 2, mask, impl="triton")


def test_bad_input_is_explained():
    q, k, v, mask = inputs(1, 4, 2, 4, 2, 16)
    with pytest.raises(ValueError, match="does not fit"):
        tree_attention(q, k, v, 3, mask)
    with pytest.raises(ValueError, match="expected"):
        tree_attention(q, k, v, 2, mask[:3, :3])
    with pytest.raises(ValueError, match="H % KV"):
        tree_attention(q[:, :, :3], k, v, 2, mask)
    with pytest.raises(ValueError, match="impl"):
        tree_attention(q, k, v, 2, mask, impl="cuda")
    with pytest.raises(ValueError, match="unknown launch settings"):
        tree_attention(q, k, v, 2, mask, impl="triton", config={"BLOCK": 1})
    with pytest.raises(ValueError, match="BLOCK_N"):
        tree_attention(q, k, v, 2, mask, impl="triton", config={"BLOCK_N": 16})
    with pytest.raises(ValueError, match="past must be at least 1"):
        tree_attention(q, k, v, 0, None)


@pytest.mark.skipif(INTERPRETING or not triton_available(), reason="needs triton, not interpreting")
def test_kernels_compile_for_h200_without_spills():
    """The compiled GPU path, checked without a GPU: Triton builds both kernels for sm_90 (H200) with the
    small model's shapes and the tile sizes launch_config picks for them, and the forward kernel keeps
    everything in registers (a spill would make it slower than SDPA). The pointer and stride alignments
    are the ones Triton specialises on at run time for 16-byte aligned tensors with head_dim-1 strides."""
    import inspect
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.kernels import tree_attention_triton as src

    target = GPUTarget("cuda", 90, 32)
    cfg = launch_config(t=65, group=3, n_kv_programs=2, keys=1024 + 65, head_dim=64, sms=132)
    kernels = {}
    for fn, consts, pointers in [
        (
            src.tree_attention_fwd,
            dict(HEADS=6, KV_HEADS=2, G=3, HEAD_DIM=64, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_D=64,
                 SPLIT=cfg["SPLITS"] > 1, PAST_IS_PTR=True, IEEE=False, TREE=True, GDC=True,
                 sqd=1, skd=1, svd=1, sod=1),
            {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "Bits": "*i32", "Past": "*i32", "Out": "*bf16",
             "PartO": "*fp32", "PartML": "*fp32"},
        ),
        (
            src.combine,
            dict(HEADS=6, HEAD_DIM=64, BLOCK_R=32, BLOCK_D=64, GDC=True, sod=1),
            {"PartO": "*fp32", "PartML": "*fp32", "Out": "*bf16"},
        ),
    ]:  # fmt: skip
        names = list(inspect.signature(fn).parameters)
        scalar = {n: "fp32" if n == "qk_scale" else "i32" for n in names}
        signature = {n: "constexpr" if n in consts else pointers.get(n, scalar[n]) for n in names}
        aligned = [n for n in names if n in pointers or (n[0] == "s" and n not in consts)]
        attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
        source = ASTSource(fn=triton.jit(fn), signature=signature, constexprs=consts, attrs=attrs)
        kernels[fn.__name__] = triton.compile(source, target=target, options={"num_warps": cfg["num_warps"]})
        assert kernels[fn.__name__].asm["cubin"]
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as ptx:
        ptx.write(kernels["tree_attention_fwd"].asm["ptx"])
        ptx.flush()
        command = [ptxas, "-arch=sm_90a", "-v", ptx.name, "-o", os.devnull]
        report = subprocess.run(command, capture_output=True, text=True)
    text = report.stdout + report.stderr
    assert report.returncode == 0 and "registers" in text, text
    assert re.search(r"\b0 bytes spill stores", text) and not re.search(r"\b[1-9]\d* bytes spill stores", text), text


@needs_cuda
@pytest.mark.parametrize(("t", "past"), [(1, 0), (17, 63), (65, 1000), (129, 3072), (257, 1)])
def test_cuda_kernel_matches_sdpa_bf16(t, past):
    q, k, v, mask = inputs(1, t, past, 6, 2, 64, dtype=torch.bfloat16, device="cuda", seed=t)
    got = tree_attention(q, k, v, past, mask, impl="triton")
    expected = reference(q, k, v, past, mask)
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)


@needs_cuda
def test_cuda_kernel_fp32_is_exact_to_fp32_tolerance():
    """fp32 uses IEEE dots (no TF32), so it matches the fp32 reference tightly (one case: slow to compile)."""
    q, k, v, mask = inputs(1, 65, 1000, 6, 2, 64, device="cuda")
    got = tree_attention(q, k, v, 1000, mask, impl="triton")
    torch.testing.assert_close(got, reference(q, k, v, 1000, mask), rtol=1e-4, atol=1e-4)


@needs_cuda
def test_cuda_graph_replays_for_any_past():
    """One captured graph with past in a device tensor serves several context lengths."""
    t, capacity = 65, 2048
    q, _, _, mask = inputs(1, t, 0, 6, 2, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(1, capacity, 2, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    past = torch.zeros((), dtype=torch.int32, device="cuda")
    packed = pack_tree_mask(mask)
    tree_attention(q, k, v, past, packed)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tree_attention(q, k, v, past, packed)
    for p in (0, 700, capacity - t):
        past.fill_(p)
        graph.replay()
        torch.testing.assert_close(out.float(), reference(q, k, v, p, mask).float(), rtol=2e-2, atol=2e-2)


def test_launch_config_splits_long_contexts_only():
    """On a 132-SM GPU with the small model's heads, a long past is split over programs; a short one is not."""
    long = launch_config(t=65, group=3, n_kv_programs=2, keys=3072 + 65, head_dim=64, sms=132)
    short = launch_config(t=65, group=3, n_kv_programs=2, keys=64 + 65, head_dim=64, sms=132)
    assert long["SPLITS"] > 1 and short["SPLITS"] == 1
    assert launch_config(t=1, group=3, n_kv_programs=2, keys=100, head_dim=128, sms=132)["BLOCK_M"] == 16


def test_bench_runs_on_cpu(capsys):
    from engine.kernels.bench_tree_attention import main

    main(["--device", "cpu", "--budgets", "4,8", "--contexts", "16", "--iters", "1"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("4", "5", "16"), ("8", "9", "16")]
    assert all(float(r[3]) > 0 for r in rows)
