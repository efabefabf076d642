"""The device tree build, walk and KV compaction (engine.fast.tree_ops) against the reference
host implementations (engine.tree, engine.kv_cache), on the CPU: same trees, same accepted
nodes and bonus, same cache contents."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from engine import tree as ref
from engine.fast import tree_ops
from engine.kv_cache import KVCache


def topk(
    rng: np.random.Generator, depth: int, vocab: int, k: int, scale: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.tensor(rng.normal(size=(depth, vocab)) * scale, dtype=torch.float32)
    top = torch.log_softmax(logits, -1).topk(k, dim=-1)
    return top.indices, top.values


def device_tree(root: int, ids: torch.Tensor, lps: torch.Tensor, budget: int) -> tree_ops.DeviceTree:
    plan = tree_ops.TreePlan(budget, ids.shape[1], ids.shape[0], "cpu")
    return tree_ops.build_tree(plan, torch.tensor([root]), ids, lps)


def assert_same_tree(got: tree_ops.DeviceTree, want: ref.Tree) -> None:
    n = len(want.tokens)
    assert got.tokens[:n].tolist() == want.tokens
    assert got.depths[:n].tolist() == want.depths
    assert got.parents[1:n].tolist() == want.parents[1:]
    assert (got.tokens[n:] == -1).all(), "nodes beyond the available prefixes must never match"
    assert np.array_equal(got.visible[:n, :n].numpy(), ref.visibility(want.parents))


@pytest.mark.parametrize(("depth", "vocab"), list(itertools.product([1, 2, 3], [2, 3, 4])))
def test_it_builds_the_reference_tree_for_every_small_budget(depth: int, vocab: int) -> None:
    rng = np.random.default_rng(depth * 10 + vocab)
    most = sum(vocab**d for d in range(1, depth + 1))
    for budget in range(1, most + 2):
        for _ in range(3):
            k = min(budget, vocab)
            ids, lps = topk(rng, depth, vocab, k)
            want = ref.build_tree(5, ids.numpy(), lps.numpy(), budget)
            assert_same_tree(device_tree(5, ids, lps, budget), want)


@pytest.mark.parametrize("seed", range(40))
def test_it_builds_the_reference_tree_on_random_drafts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    depth, vocab, budget = int(rng.integers(1, 16)), int(rng.integers(2, 300)), int(rng.integers(1, 300))
    k = min(budget, vocab)
    ids, lps = topk(rng, depth, vocab, k, scale=float(rng.uniform(0.2, 6)))
    want = ref.build_tree(1, ids.numpy(), lps.numpy(), budget)
    assert_same_tree(device_tree(1, ids, lps, budget), want)


@pytest.mark.parametrize("seed", range(6))
def test_the_pair_list_leaves_the_tree_as_every_pair_builds_it_when_scores_tie(seed: int) -> None:
    # Log-probabilities on a coarse grid tie often, within a depth and across depths. (The heap
    # breaks exact ties by other rules, so the reference is the same build over every pair.)
    rng = np.random.default_rng(100 + seed)
    depth, vocab = 6, 12
    for budget in (2, 5, 16, 33, 64, 80):
        k = min(budget, vocab)
        lps = -torch.tensor(rng.integers(0, 4, size=(depth, k)), dtype=torch.float32).sort(-1).values / 2
        ids = torch.tensor(np.stack([rng.permutation(vocab)[:k] for _ in range(depth)]))
        plan = tree_ops.TreePlan(budget, k, depth, "cpu")
        every = tree_ops.TreePlan(budget, k, depth, "cpu")
        every.parent_pos = torch.arange(budget).repeat_interleave(k)
        every.rank = torch.arange(k).repeat(budget)
        every.pairs = budget * k
        every.pair_valid = torch.ones(budget * k, dtype=torch.bool)
        assert plan.pairs < every.pairs
        got = tree_ops.build_tree(plan, torch.tensor([1]), ids, lps)
        want = tree_ops.build_tree(every, torch.tensor([1]), ids, lps)
        for field in ("tokens", "parents", "depths", "visible"):
            assert torch.equal(getattr(got, field), getattr(want, field)), (budget, field)


def test_a_certain_draft_keeps_parents_before_children() -> None:
    # log-probability 0 (probability 1 in float32) ties a child with its parent.
    ids = torch.tensor([[4, 5], [6, 7], [8, 9]])
    lps = torch.tensor([[0.0, -20.0], [0.0, -21.0], [-0.5, -1.0]])
    want = ref.build_tree(1, ids.numpy(), lps.numpy(), 5)
    got = device_tree(1, ids, lps, 5)
    assert_same_tree(got, want)
    assert all(p < i for i, p in enumerate(got.parents.tolist()) if i)


def test_chain_tree_matches_the_reference_chain() -> None:
    got = tree_ops.chain_tree(torch.tensor([3]), torch.tensor([7, 8, 9]))
    want = ref.chain_tree(3, [7, 8, 9])
    assert_same_tree(got, want)


def random_choices(rng: np.random.Generator, tree: ref.Tree, vocab: int) -> list[int]:
    """Per node, the token of one of its children (often) or some other token."""
    children = tree.children()
    out = []
    for kids in children:
        if kids and rng.random() < 0.7:
            out.append(int(rng.choice(list(kids))))
        else:
            out.append(int(rng.integers(0, vocab)))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_the_walk_accepts_the_reference_path_and_bonus(seed: int) -> None:
    rng = np.random.default_rng(seed)
    depth, vocab, budget = int(rng.integers(1, 10)), int(rng.integers(2, 30)), int(rng.integers(1, 80))
    ids, lps = topk(rng, depth, vocab, min(budget, vocab))
    want_tree = ref.build_tree(2, ids.numpy(), lps.numpy(), budget)
    got_tree = device_tree(2, ids, lps, budget)
    n = len(want_tree.tokens)
    choices = random_choices(rng, want_tree, vocab)
    choices += [int(rng.integers(0, vocab))] * (budget + 1 - n)  # the padding nodes' own choices
    accepted, bonus = ref.walk(want_tree, choices[:n])
    block = depth + 1
    w = tree_ops.walk(got_tree, torch.tensor(choices), block)
    assert int(w.count) == len(accepted)
    assert w.path[: len(accepted)].tolist() == accepted
    assert int(w.bonus) == bonus


@pytest.mark.parametrize("seed", range(10))
def test_compaction_moves_the_same_rows_as_the_reference_cache(seed: int) -> None:
    rng = np.random.default_rng(seed)
    layers, rows, start, block = 3, 40, int(rng.integers(0, 10)), 6
    cache = KVCache(layers, kv_heads=2, head_dim=4, rows=rows)
    cache.k.normal_()
    cache.v.normal_()
    kv = torch.stack([cache.k[:, 0], cache.v[:, 0]], dim=1).clone()  # [layers, 2, rows, KV, hd]
    depth = int(rng.integers(1, block))
    accepted = [0, *sorted(rng.choice(np.arange(1, 20), size=depth - 1, replace=False).tolist())]
    path = torch.tensor(accepted + [0] * (block - depth))
    tree_ops.compact(kv, torch.tensor([start]), path)
    cache.commit(start, accepted)
    end = start + depth  # rows past the accepted ones are scratch
    assert torch.equal(kv[:, 0, :end], cache.k[:, 0, :end])
    assert torch.equal(kv[:, 1, :end], cache.v[:, 0, :end])


def test_the_tree_build_benchmark_runs_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.fast.bench_tree import main

    main(["--device", "cpu", "--budgets", "8,32", "--iters", "2"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["8", "32"] and all(float(r[1]) > 0 and r[2:] == ["-", "-"] for r in rows)


@pytest.mark.parametrize("seed", range(40))
def test_the_context_chain_and_graft_match_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vocab, depth, budget = int(rng.choice([3, 6, 40])), int(rng.choice([3, 7])), int(rng.choice([1, 4, 9]))
    history = rng.integers(0, vocab, size=int(rng.integers(1, 60))).tolist()
    ngram = int(rng.integers(1, 4))
    want_chain = ref.context_chain(history, ngram, depth)
    hist = torch.tensor(history + [77] * int(rng.integers(0, 9)))  # rows past the text hold scratch
    chain = tree_ops.context_chain(hist, torch.tensor([len(history) - 1]), ngram, depth)
    assert chain.tolist() == want_chain + [-1] * (depth - len(want_chain))
    ids, lps = topk(rng, depth, vocab, min(budget, vocab))
    want = ref.graft(ref.build_tree(history[-1], ids.numpy(), lps.numpy(), budget), want_chain)
    built = device_tree(history[-1], ids, lps, budget)
    n = 1 + budget + depth
    got = tree_ops.DeviceTree(
        torch.cat([built.tokens, torch.full((depth,), 5)]),
        torch.cat([built.parents, torch.full((depth,), 2)]),
        torch.cat([built.depths, torch.full((depth,), 3)]),
        torch.ones(n, n, dtype=torch.bool),  # stale: graft must clear the slots' rows
    )
    got.visible[: 1 + budget, : 1 + budget] = built.visible
    got.visible[: 1 + budget, 1 + budget :] = False
    tree_ops.graft(got, chain)
    live = (got.tokens >= 0).nonzero().view(-1).tolist()
    assert [got.tokens[i].item() for i in live] == want.tokens  # drafted nodes exist: slots fill in order
    assert [got.parents[i].item() for i in live][1:] == want.parents[1:]
    assert [got.depths[i].item() for i in live] == want.depths
    assert torch.equal(got.visible[live][:, live], torch.from_numpy(ref.visibility(want.parents)))
    unused = [i for i in range(n) if i not in live]
    for i in unused:  # never matched, and sees only the root and itself
        assert got.visible[i].nonzero().view(-1).tolist() == [0, i]
