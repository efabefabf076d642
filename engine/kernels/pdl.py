"""Programmatic dependent launch (PDL, Hopper and later) for the engine's Triton kernels.

A small model's step is a chain of short kernels, each paying launch latency and a pipeline bubble
between the previous kernel's last program and its own first. With PDL a kernel is launched while its
predecessor still runs: its programs are placed and wait in `griddepcontrol.wait` until the predecessor
has finished and its writes are visible, and they tell the next kernel to launch as soon as they pass
that wait. So at most two kernels of a chain are resident, and every kernel still reads its inputs
(and overwrites buffers) only after everything before it completed: the order of effects is unchanged.

Kernels take a constexpr `GDC` flag and, when it is set, call `gdc_wait` before their first global
access and `gdc_launch_dependents` right after it (the `gdc` helper below, or the same two lines where a
kernel is wrapped lazily); `options(device)` gives the launch keywords.
Off on the CPU and under the interpreter (no such instructions), before compute capability 9, and with
ENGINE_PDL=0. Kernels launched by PyTorch (embedding, cuBLAS, argmax) never signal early, so a Triton
kernel after one of them simply starts when it ends, as without PDL.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl


@functools.cache
def _supported(index: int) -> bool:
    if os.environ.get("TRITON_INTERPRET", "0") == "1" or os.environ.get("ENGINE_PDL", "1") == "0":
        return False
    if torch.cuda.get_device_capability(index)[0] < 9:
        return False
    return hasattr(tl.extra.cuda, "gdc_wait")  # Triton ≥ 3.3


def options(device: torch.device) -> dict[str, bool]:
    """Launch keywords for a kernel with a `GDC` constexpr: PDL on where the device supports it."""
    if device.type != "cuda":
        return {"GDC": False}
    if not _supported(device.index if device.index is not None else torch.cuda.current_device()):
        return {"GDC": False}
    return {"GDC": True, "launch_pdl": True}


@triton.jit
def gdc(GDC: tl.constexpr):
    """Wait until the previous kernel has finished (its writes visible), then let the next one launch."""
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
