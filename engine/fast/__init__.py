"""The CUDA fast path (issue 7): static buffers, CUDA graphs, the tree built and walked on the GPU.

`FastPath` (`engine.fast.path`) runs greedy (T = 0) generation for `ar`, `dflash` and `ddtree`
with every round's work on the device and one device-to-host copy per round; `Decoder` uses it
automatically on CUDA (`ENGINE_FAST=0` turns it off). The same code runs eagerly on the CPU
(graphs off), which is how CI checks it against the reference path (`engine.tree`,
`engine.kv_cache`, `engine.decode`).
"""
