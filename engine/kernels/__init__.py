"""Native kernels for the engine's GPU path, each with its pure-PyTorch reference as the CPU fallback."""

from engine.kernels.tree_attention import pack_tree_mask, reference, tree_attention

__all__ = ["pack_tree_mask", "reference", "tree_attention"]
