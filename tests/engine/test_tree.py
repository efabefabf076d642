from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.tree import Tree, build_tree, chain_tree, graft, visibility, walk
from engine.tree import context_chain as ref_chain


def brute_force_top_prefixes(logprobs: np.ndarray, budget: int) -> set[tuple[int, ...]]:
    """All prefixes of length 1..L scored by summed log-probability; the best `budget` of them."""
    depth, vocab = logprobs.shape
    scored = []
    for d in range(1, depth + 1):
        for seq in itertools.product(range(vocab), repeat=d):
            scored.append((sum(logprobs[i, t] for i, t in enumerate(seq)), seq))
    scored.sort(key=lambda x: -x[0])
    return {seq for _, seq in scored[:budget]}


def paths(tree: Tree) -> set[tuple[int, ...]]:
    out = set()
    for i in range(1, len(tree.tokens)):
        path, node = [], i
        while node != 0:
            path.append(tree.tokens[node])
            node = tree.parents[node]
        out.add(tuple(reversed(path)))
    return out


def random_logprobs(rng: np.random.Generator, depth: int, vocab: int) -> np.ndarray:
    logits = rng.normal(size=(depth, vocab)) * 2
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def topk(logprobs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-logprobs, axis=-1, kind="stable")[:, :k]
    return order, np.take_along_axis(logprobs, order, axis=-1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("depth,vocab,budget", [(3, 4, 5), (4, 3, 12), (2, 5, 7), (3, 3, 30)])
def test_it_builds_the_top_budget_prefixes(seed: int, depth: int, vocab: int, budget: int) -> None:
    lp = random_logprobs(np.random.default_rng(seed), depth, vocab)
    ids, vals = topk(lp, min(budget, vocab))
    tree = build_tree(99, ids, vals.astype(np.float32), budget)
    assert tree.size == min(budget, sum(vocab**d for d in range(1, depth + 1)))
    assert paths(tree) == brute_force_top_prefixes(lp.astype(np.float32), budget)


def test_it_keeps_parents_before_children_and_depths_consistent() -> None:
    lp = random_logprobs(np.random.default_rng(7), 6, 8)
    ids, vals = topk(lp, 8)
    tree = build_tree(1, ids, vals, 40)
    assert tree.parents[0] == -1 and tree.depths[0] == 0
    for i in range(1, len(tree.tokens)):
        assert tree.parents[i] < i
        assert tree.depths[i] == tree.depths[tree.parents[i]] + 1
    # prefix-closed: every node's path minus its last token is a node too (or the root)
    all_paths = paths(tree)
    assert all(p[:-1] in all_paths or len(p) == 1 for p in all_paths)


def test_it_marks_exactly_the_ancestor_closure_as_visible() -> None:
    lp = random_logprobs(np.random.default_rng(3), 5, 6)
    ids, vals = topk(lp, 6)
    tree = build_tree(0, ids, vals, 30)
    vis = visibility(tree.parents)
    for i in range(len(tree.tokens)):
        ancestors, node = {i}, i
        while node > 0:
            node = tree.parents[node]
            ancestors.add(node)
        assert set(np.flatnonzero(vis[i])) == ancestors


def test_it_walks_down_a_branch_that_is_not_the_first_child() -> None:
    # root 5 ─┬─ 7 (1) ── 9 (3)
    #         └─ 8 (2) ─┬─ 1 (4)
    #                   └─ 2 (5) ── 3 (6)
    tree = Tree([5, 7, 8, 9, 1, 2, 3], [-1, 0, 0, 1, 2, 2, 5], [0, 1, 1, 2, 2, 2, 3])
    # target choices per node: after root → 8, after node 2 → 2, after node 5 → 3, after node 6 → 42
    choices = [8, 0, 2, 0, 0, 3, 42]
    assert walk(tree, choices) == ([0, 2, 5, 6], 42)
    assert walk(tree, [4, 0, 0, 0, 0, 0, 0]) == ([0], 4)  # nothing matches: τ = 1, bonus from root


def test_it_turns_a_chain_into_a_single_path() -> None:
    tree = chain_tree(3, [4, 5, 6])
    assert tree.parents == [-1, 0, 1, 2] and tree.depths == [0, 1, 2, 3]
    assert walk(tree, [4, 5, 0, 0]) == ([0, 1, 2], 0)


def test_it_never_exceeds_the_budget_and_handles_tiny_inputs() -> None:
    lp = random_logprobs(np.random.default_rng(1), 2, 2)
    ids, vals = topk(lp, 2)
    assert build_tree(0, ids, vals, 100).size == 6  # every prefix of depth ≤ 2 over 2 tokens
    assert build_tree(0, ids, vals, 0).size == 0


def test_the_context_chain_continues_the_latest_longest_match() -> None:
    #          0  1  2  3  4  5  6  7  8  9
    history = [5, 6, 7, 8, 1, 6, 7, 9, 6, 7]  # ends in "6 7": matched at 1-2 (then 8) and 5-6 (then 9)
    assert ref_chain(history, 2, 3) == [9, 6, 7]  # the latest of the two-token matches, up to the end
    assert ref_chain(history, 3, 2) == [9, 6]  # no three-token match: the longest found is two
    assert ref_chain([5, 6, 7, 8, 5, 6, 7], 3, 4) == [8, 5, 6, 7]
    assert ref_chain([1, 2, 3], 3, 4) == []  # the last token never occurred before
    assert ref_chain([4], 2, 4) == [] and ref_chain([4, 4], 2, 3) == [4, 4, 4]
    assert ref_chain([1, 2, 3, 1, 2, 3], 2, 5) == [1, 2, 3, 1, 2]  # past the text's end it loops


def test_grafting_reuses_matching_nodes_and_appends_the_rest() -> None:
    tree = Tree([9, 1, 2, 3], [-1, 0, 0, 1], [0, 1, 1, 2])  # 9 → {1 → {3}, 2}
    grafted = graft(tree, [1, 3, 5, 1])
    assert grafted.tokens == [9, 1, 2, 3, 5, 1] and grafted.parents == [-1, 0, 0, 1, 3, 4]
    assert grafted.depths == [0, 1, 1, 2, 3, 4]
    assert walk(grafted, [1, 3, 0, 5, 1, 8]) == ([0, 1, 3, 4, 5], 8)  # the walk follows it to its end
    assert graft(tree, [2]).tokens == tree.tokens and graft(tree, []).tokens == tree.tokens
    assert tree.tokens == [9, 1, 2, 3]  # the input tree is left as it was
