"""Draft trees: build (best-first heap), compile (ids, depth positions, ancestor mask), walk.

DDTree (Ringel & Romano, "Diffusion Draft Tree", arXiv 2604.12989): the drafter gives one
distribution per depth; the expected accepted length of a prefix-closed tree is the sum of the
drafter probabilities of its nodes, so the best tree under a node budget B is the set of the B
most probable prefixes, found best-first with a heap. Only the top K = min(B, V) tokens of each
depth can appear. A chain (DFlash) is the special case K = 1; plain decoding is the empty tree.

Node 0 is the root (the bonus token). Pop order is topological: parent[i] < i for every node.

Context lookup (optional, `Decoder(lookup=n)`): the tokens that followed the latest earlier
occurrence of the text's last n tokens (else n − 1, …, 1), repeated as a loop when they run out,
are grafted onto the tree as one more branch (prompt-lookup decoding; code repeats itself). Where
the branch runs along existing nodes it reuses them; the rest are new nodes appended after the B
drafted ones. The target still verifies every node, so the output is unchanged; only τ moves.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass
class Tree:
    tokens: list[int]  # node token ids, root first: length 1 + B
    parents: list[int]  # parents[0] = -1, parents[i] < i
    depths: list[int]  # depths[0] = 0

    @property
    def size(self) -> int:
        return len(self.tokens) - 1

    def children(self) -> list[dict[int, int]]:
        """Per node, token → child index (siblings never share a token: they are distinct ranks)."""
        out: list[dict[int, int]] = [{} for _ in self.tokens]
        for i in range(1, len(self.tokens)):
            out[self.parents[i]][self.tokens[i]] = i
        return out


def build_tree(root: int, top_ids: np.ndarray, top_logprobs: np.ndarray, budget: int) -> Tree:
    """Best-first tree of up to `budget` non-root nodes.

    top_ids, top_logprobs: [L, K], each row sorted by descending log-probability, depth 1..L.
    Steps:
      1. Start the heap with the most probable token at depth 1.
      2. Pop the best prefix; it becomes node i (its parent was popped earlier, so parent < i).
      3. Push its next sibling (same parent, next rank at this depth) and its first child
         (best token one depth deeper). Each pop pushes at most two entries: O(B log B).
    Ties break on the rank tuple, then scores are float64 sums of float32 inputs, as in the
    reference implementation, so trees are reproducible bit for bit.
    """
    depth_limit, k = top_ids.shape
    ids = top_ids.tolist()
    lps = top_logprobs.astype(np.float32).tolist()
    tokens, parents, depths = [root], [-1], [0]
    if budget <= 0 or depth_limit == 0 or k == 0:
        return Tree(tokens, parents, depths)
    heap: list[tuple[float, tuple[int, ...], int, int, int, float]] = [(-lps[0][0], (0,), 0, 1, 0, lps[0][0])]
    while heap and len(tokens) <= budget:
        _, ranks, parent, depth, rank, score = heapq.heappop(heap)
        index = len(tokens)
        tokens.append(ids[depth - 1][rank])
        parents.append(parent)
        depths.append(depth)
        if rank + 1 < k:
            sibling = score - lps[depth - 1][rank] + lps[depth - 1][rank + 1]
            heapq.heappush(heap, (-sibling, ranks[:-1] + (rank + 1,), parent, depth, rank + 1, sibling))
        if depth < depth_limit:
            child = score + lps[depth][0]
            heapq.heappush(heap, (-child, ranks + (0,), index, depth + 1, 0, child))
    return Tree(tokens, parents, depths)


def chain_tree(root: int, chain: list[int]) -> Tree:
    """DFlash: one path of the per-depth argmaxes."""
    n = len(chain)
    return Tree([root, *chain], list(range(-1, n)), list(range(n + 1)))


def context_chain(history: list[int], ngram: int, length: int) -> list[int]:
    """Up to `length` tokens that followed the latest earlier match of history's last `ngram` tokens.

    The longest match (up to `ngram` tokens, at least one) wins; among equally long ones, the latest.
    The match ends before the last token; a continuation that reaches the last token starts over from
    the match's end, as a loop of that period would (greedy text from a small model loops often).
    """
    last = len(history) - 1
    best, end = 0, -1
    for e in range(last):  # e: where an earlier match ends
        m = 0
        while m < ngram and e - m >= 0 and history[e - m] == history[last - m]:
            m += 1
        if m and m >= best:
            best, end = m, e
    return [history[end + 1 + k % (last - end)] for k in range(length)] if best else []


def graft(tree: Tree, chain: list[int]) -> Tree:
    """The tree with `chain` as a path from the root: existing nodes reused, new ones appended."""
    tokens, parents, depths = list(tree.tokens), list(tree.parents), list(tree.depths)
    children = tree.children()
    node = 0
    for depth, token in enumerate(chain, start=1):
        nxt = children[node].get(token)
        if nxt is None:
            nxt = len(tokens)
            tokens.append(token)
            parents.append(node)
            depths.append(depth)
            children[node][token] = nxt
            children.append({})
        node = nxt
    return Tree(tokens, parents, depths)


def visibility(parents: list[int]) -> np.ndarray:
    """bool [(1+B), (1+B)]: row i is True at i and at every ancestor of i (the ancestor closure)."""
    n = len(parents)
    vis = np.zeros((n, n), dtype=bool)
    vis[0, 0] = True
    for i in range(1, n):
        vis[i] = vis[parents[i]]  # parent rows are complete already: parent < i
        vis[i, i] = True
    return vis


def walk(tree: Tree, target_tokens: list[int]) -> tuple[list[int], int]:
    """Follow the target's choices down the tree.

    target_tokens[i] is the token the target picks after node i's path (argmax at T = 0, one
    independent draw at T > 0). From the root, move to the child holding the target's token while
    one exists. Returns (accepted node indices, ascending, root included; next bonus token).
    Every committed token is exactly the target's own choice, so the output is lossless.
    """
    children = tree.children()
    node, accepted = 0, [0]
    while True:
        choice = target_tokens[node]
        nxt = children[node].get(choice)
        if nxt is None:
            return accepted, choice
        accepted.append(nxt)
        node = nxt
