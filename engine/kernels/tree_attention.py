"""Attention of the draft tree's queries over the past plus the tree itself, under the ancestor mask.

    tree_attention(q, k, v, past, tree_mask) -> [N, T, H, hd]

- q: [N, T, H, hd], the T tree nodes (root first); k, v: [N, >= past + T, KV, hd], the KV cache rows with
  the tree's own rows at [past, past + T) (rows beyond past + T are ignored); H a multiple of KV (GQA).
- Every past row is visible to every query; tree column c is visible to node t where tree_mask[t, c]
  (each node sees its ancestors and itself). Nodes must come in topological order (parents[i] < i, as
  engine.tree builds them), so the mask is lower-triangular: the kernel skips tree columns after a row's
  node, and `reference` would disagree on a mask with entries above the diagonal.
- Scale 1 / sqrt(hd). The result has q's dtype ([N, T, H, hd]; a strided view on the reference path); the
  caller applies o_proj.
- tree_mask: bool [T, T], or the same packed by `pack_tree_mask` (int32 [T, ceil(T / 32)], bit c % 32 of
  word c // 32). Pack once per round and pass the packed form to every layer to save the packing launches.
- tree_mask None: no tree columns at all, every query sees exactly rows [0, past) (past >= 1). Callers
  whose queries' own rows are already written below `past` (a one-token step, a block that attends to
  itself both ways) skip the tree loop this way.
- past: a Python int, or a 0-dim integer tensor on q's device. An int is baked into a captured CUDA graph;
  a device tensor is read by the kernel, so one graph (fixed T and k's capacity) serves every context:
  write the new length into the tensor before each replay. The split heuristic then sizes itself on k's
  capacity instead of past + T.

Backends (`impl`):
- "auto": the Triton kernel for CUDA tensors when Triton is importable, the PyTorch reference otherwise.
- "triton": the kernel, always. CPU tensors need TRITON_INTERPRET=1 in the environment before triton is
  first imported (Triton's interpreter then runs the kernel in NumPy): that is how CI tests the kernel
  itself without a GPU (tests/engine/test_tree_attention.py).
- "torch": `reference`, which is what `engine.model.Attention.attend` does — SDPA with a dense
  [T, past + T] bool mask and enable_gqa.

The Triton path makes no host synchronisation and allocates only buffers whose sizes follow from the
shapes, so it can be captured in a CUDA graph. Speed: `python -m engine.kernels.bench_tree_attention`.
"""

from __future__ import annotations

import functools
import math
import os

import torch
import torch.nn.functional as F
from torch import Tensor

IMPLS = ("auto", "triton", "torch")
LAUNCH_SETTINGS = ("BLOCK_M", "BLOCK_N", "SPLITS", "num_warps")


def pack_tree_mask(tree_mask: Tensor) -> Tensor:
    """bool [T, T] -> int32 [T, ceil(T / 32)]: bit c % 32 of word c // 32 of row t is tree_mask[t, c]."""
    if tree_mask.dtype != torch.bool or tree_mask.dim() != 2 or tree_mask.shape[0] != tree_mask.shape[1]:
        raise ValueError(f"tree_mask must be a square bool matrix, got {tuple(tree_mask.shape)} {tree_mask.dtype}")
    t = tree_mask.shape[0]
    words = -(-t // 32)
    padded = F.pad(tree_mask.to(torch.int64), (0, words * 32 - t)).view(t, words, 32)
    shifts = torch.arange(32, device=tree_mask.device, dtype=torch.int64)
    packed = (padded << shifts).sum(-1)  # distinct powers of two: the sum is the bitwise or, below 2**32
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)  # same bits, as int32


def unpack_tree_mask(packed: Tensor, t: int) -> Tensor:
    """The inverse of `pack_tree_mask`: int32 [T, W] -> bool [T, T]."""
    shifts = torch.arange(32, device=packed.device, dtype=torch.int32)
    bits = (packed.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(packed.shape[0], -1)[:, :t].bool()


def reference(q: Tensor, k: Tensor, v: Tensor, past: int | Tensor, tree_mask: Tensor | None) -> Tensor:
    """The plain PyTorch path: SDPA over keys [0, past + T) with a dense bool mask (past all visible)."""
    n, t, h, _ = q.shape
    past = int(past)  # a device tensor costs a sync here: this path is the CPU fallback and the reference
    if tree_mask is None:
        tree_mask = torch.zeros(t, t, dtype=torch.bool, device=q.device)
    elif tree_mask.dtype != torch.bool:
        tree_mask = unpack_tree_mask(tree_mask, t)
    mask = torch.cat([torch.ones(t, past, dtype=torch.bool, device=q.device), tree_mask.to(q.device)], dim=1)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k[:, : past + t].transpose(1, 2),
        v[:, : past + t].transpose(1, 2),
        attn_mask=mask,
        enable_gqa=k.shape[2] != h,
    )  # [N, H, T, hd]
    return out.transpose(1, 2)


def tree_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    past: int | Tensor,
    tree_mask: Tensor | None,
    *,
    impl: str = "auto",
    config: dict[str, int] | None = None,
) -> Tensor:
    """Attention of T tree queries over `past` visible rows plus the tree under its ancestor mask (module doc).

    config overrides entries of `launch_config`'s choice for the Triton path (tuning and tests).
    """
    _check(q, k, v, past, tree_mask)
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    _check_config(config or {})
    if impl == "torch" or (impl == "auto" and not (q.is_cuda and triton_available())):
        return reference(q, k, v, past, tree_mask)
    if not triton_available():
        raise RuntimeError("impl='triton' needs the triton package (the engine extra pins it)")
    interpret = _interpreting()
    if not q.is_cuda and not interpret:
        raise RuntimeError("impl='triton' on CPU tensors runs only under Triton's interpreter: set TRITON_INTERPRET=1")
    return _triton_forward(q, k, v, past, tree_mask, interpret, config or {})


@functools.cache
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _check(q: Tensor, k: Tensor, v: Tensor, past: int | Tensor, tree_mask: Tensor | None) -> None:
    """Shape and type errors in words; Python-only (no device sync), so it is free under graph capture."""
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(f"q must be [N, T, H, hd] and k, v the same [N, S, KV, hd]: {q.shape}, {k.shape}, {v.shape}")
    n, t, h, hd = q.shape
    if k.shape[0] != n or k.shape[3] != hd or h % k.shape[2]:
        raise ValueError(f"k/v {tuple(k.shape)} do not fit q {tuple(q.shape)} (batch, head_dim, H % KV == 0)")
    if isinstance(past, Tensor):
        if past.dim() != 0 or past.dtype.is_floating_point or past.device != q.device:
            raise ValueError("a tensor past must be a 0-dim integer tensor on q's device")
    elif past < 0 or past + t > k.shape[1]:
        raise ValueError(f"past + T = {past + t} does not fit the {k.shape[1]} key rows")
    if t > k.shape[1]:
        raise ValueError(f"T = {t} queries but only {k.shape[1]} key rows")
    if tree_mask is None:
        if isinstance(past, int) and past < 1:
            raise ValueError("without a tree mask the queries see rows [0, past): past must be at least 1")
        return
    words = -(-t // 32)
    if tree_mask.dtype == torch.bool:
        expected = (t, t)
    elif tree_mask.dtype == torch.int32:
        expected = (t, words)
    else:
        raise ValueError(f"tree_mask must be bool [T, T] or packed int32 [T, W], got {tree_mask.dtype}")
    if tuple(tree_mask.shape) != expected:
        raise ValueError(f"tree_mask shape {tuple(tree_mask.shape)}, expected {expected} for T = {t}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one of fp32/fp16/bf16, got {q.dtype}, {k.dtype}, {v.dtype}")


def _check_config(config: dict[str, int]) -> None:
    unknown = set(config) - set(LAUNCH_SETTINGS)
    if unknown:
        raise ValueError(f"unknown launch settings {sorted(unknown)}; known: {LAUNCH_SETTINGS}")
    smallest = {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 1}  # tl.dot tiles; whole mask words per key block
    for key, least in smallest.items():
        value = config.get(key, least)
        if value < least or value & (value - 1):
            raise ValueError(f"{key} must be a power of two >= {least}, got {value}")
    if config.get("SPLITS", 1) < 1:
        raise ValueError(f"SPLITS must be at least 1, got {config['SPLITS']}")


@functools.cache
def _kernels(interpret: bool):
    """The two kernels wrapped by `triton.jit` for one mode.

    `triton.jit` chooses between compiling and interpreting when it wraps a function, from TRITON_INTERPRET
    at that moment. Triton's own library functions (tl.max, tl.sum, tl.cdiv) are wrapped when triton is
    first imported, so the variable must be set before that import; ours are wrapped here, on first use.
    """
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    from engine.kernels import tree_attention_triton as src

    if interpret and isinstance(tl.max, JITFunction):
        raise RuntimeError("TRITON_INTERPRET=1 was set after triton was imported; set it before the first import")
    # Sizes that change from call to call are not specialised on (Triton would otherwise compile extra
    # variants for values equal to 1 or divisible by 16 as the context grows).
    fwd = triton.jit(src.tree_attention_fwd, do_not_specialize=["past_int", "T", "W"])
    return fwd, triton.jit(src.combine, do_not_specialize=["R", "T", "splits"])


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def launch_config(t: int, group: int, n_kv_programs: int, keys: int, head_dim: int, sms: int) -> dict[str, int]:
    """Block sizes and the number of key splits, from shapes only (fixed per captured graph).

    Rows are (node, head-in-group) pairs: T * G per KV head. Tiles stay at 64 x 64 for head_dim <= 64
    (the `small` model: hd 64, 6 heads over 2 KV heads) and narrow the key tile for hd 128 to keep
    registers in check. The keys are split until the grid covers the SMs about twice, but each split keeps
    at least four key blocks so the merge stays cheap.
    """
    rows = t * group
    block_m = 16 if rows <= 16 else 32 if rows <= 32 else 64
    block_n = 64 if head_dim <= 64 else 32
    base = -(-rows // block_m) * n_kv_programs
    key_blocks = -(-keys // block_n)
    splits = max(1, min(2 * sms // max(base, 1), key_blocks // 4, 16))
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "SPLITS": splits, "num_warps": 4}


def _triton_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    past: int | Tensor,
    tree_mask: Tensor | None,
    interpret: bool,
    override: dict[str, int],
) -> Tensor:
    from engine.kernels import pdl

    fwd, combine = _kernels(interpret)
    launch = pdl.options(q.device)
    n, t, h, hd = q.shape
    kv = k.shape[2]
    tree = tree_mask is not None
    if tree_mask is None:
        bits = q[0, :1, 0]  # a placeholder pointer: the kernel has no tree loop to read it (no allocation,
        # which in a captured graph would be one more kernel per layer)
    else:
        bits = pack_tree_mask(tree_mask) if tree_mask.dtype == torch.bool else tree_mask
        bits = bits.to(q.device).contiguous()
    past_is_ptr = isinstance(past, Tensor)
    keys = k.shape[1] if past_is_ptr else past + (t if tree else 0)
    cfg = launch_config(t, h // kv, n * kv, keys, hd, _sm_count(q.device))
    if interpret:  # the interpreter pays per block, not per element: the largest tiles, no split
        cfg.update(BLOCK_M=max(16, min(128, 1 << (t * (h // kv) - 1).bit_length())), BLOCK_N=128, SPLITS=1)
    cfg.update(override)
    block_m, splits = cfg["BLOCK_M"], cfg["SPLITS"]
    out = torch.empty((n, t, h, hd), dtype=q.dtype, device=q.device)
    if splits > 1:
        part_o = torch.empty((splits, n, t, h, hd), dtype=torch.float32, device=q.device)
        part_ml = torch.empty((splits, n, t, h, 2), dtype=torch.float32, device=q.device)
    else:
        part_o = part_ml = out  # unused: the kernel writes `out` directly
    block_d = max(16, 1 << (hd - 1).bit_length())
    grid = (-(-(t * (h // kv)) // block_m), n * kv, splits)
    fwd[grid](
        q, k, v, bits, past if past_is_ptr else bits, out, part_o, part_ml,
        0 if past_is_ptr else past, t, bits.shape[1], (1.0 / math.sqrt(hd)) * math.log2(math.e),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        HEADS=h, KV_HEADS=kv, G=h // kv, HEAD_DIM=hd,
        BLOCK_M=block_m, BLOCK_N=cfg["BLOCK_N"], BLOCK_D=block_d,
        SPLIT=splits > 1, PAST_IS_PTR=past_is_ptr, IEEE=q.dtype == torch.float32, TREE=tree,
        num_warps=cfg["num_warps"], num_stages=2, **launch,
    )  # fmt: skip
    if splits > 1:
        rows = n * t * h
        block_r = 32
        combine[(-(-rows // block_r),)](
            part_o, part_ml, out, rows, t, splits, *out.stride(),
            HEADS=h, HEAD_DIM=hd, BLOCK_R=block_r, BLOCK_D=block_d, num_warps=4, **launch,
        )  # fmt: skip
    return out
