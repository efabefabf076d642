"""Tree build, walk and KV compaction as fixed-shape torch ops (capturable in a CUDA graph).

The reference (`engine.tree.build_tree`) pops a heap on the host. Here the same tree, the B most
probable prefixes, is found depth by depth with no host round trip:
  - a node at depth d is among the overall top B only if it is among the top B at depth d, and
    its parent is then among the top B at depth d − 1 (a child never outranks its parent);
  - the child of rank r of the parent at position p (parents sorted best first) ranks after the
    (p + 1)(r + 1) − 1 pairs (p' ≤ p, r' ≤ r) and after their p + 1 parents (a child never
    outranks its parent), so only the pairs with (p + 1)(r + 2) ≤ B (216 for B = 64) can enter; that
    static pair list (`TreePlan`) keeps every step a fixed-size gather + top-k (dropping a pair that
    cannot enter leaves the overall top B as it is: the survivors it displaces cannot enter either);
  - the L·B survivors are merged by one stable sort (best first, shallower first on ties), which
    is the heap's pop order whenever scores differ (on exact ties the heap compares rank tuples).
Scores are float64 sums of the float32 log-probabilities, as in the reference, so equal inputs
give equal trees. Nodes that do not exist (fewer than B prefixes) get token −1 and never match.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class TreePlan:
    """Static index tensors for one (budget, K, depth limit)."""

    def __init__(self, budget: int, k: int, depth_limit: int, device: torch.device | str) -> None:
        if budget < 1 or k < 1 or depth_limit < 1:
            raise ValueError(f"tree plan needs budget, k, depth >= 1 (got {budget}, {k}, {depth_limit})")
        self.budget, self.k, self.depth_limit = budget, k, depth_limit
        # (p + 1)(r + 2) ≤ B, not (p + 1)(r + 1) ≤ B: 216 pairs instead of 280 for B = 64, which keeps
        # the Triton depth loop's top-k at 256 candidates instead of 512.
        pairs = [(p, r) for p in range(budget) for r in range(min(k, budget // (p + 1) - 1))]
        self.pairs = len(pairs)
        # Padded with pairs of −inf children to at least B, so every depth keeps B survivors.
        pairs += [(0, 0)] * (budget - len(pairs))
        self.parent_pos = torch.tensor([p for p, _ in pairs], dtype=torch.long, device=device)
        self.rank = torch.tensor([r for _, r in pairs], dtype=torch.long, device=device)
        self.pair_valid = torch.arange(len(pairs), device=device) < self.pairs
        first = torch.arange(budget, device=device)
        self.first_rank = first.clamp(max=k - 1)
        self.first_valid = first < k
        self.nodes = torch.arange(1, budget + 1, device=device)


@dataclass
class DeviceTree:
    tokens: Tensor  # [1+B] long, root first; −1 for nodes that do not exist
    parents: Tensor  # [1+B] long, parents[0] = 0 (the root is its own parent here)
    depths: Tensor  # [1+B] long
    visible: Tensor  # [1+B, 1+B] bool, ancestor-or-self


def build_tree(plan: TreePlan, root: Tensor, top_ids: Tensor, top_logprobs: Tensor) -> DeviceTree:
    """root: long [1]; top_ids, top_logprobs: [L, K], rows sorted best first (depth 1..L)."""
    b, depth_limit = plan.budget, plan.depth_limit
    lp = top_logprobs.double()
    neg_inf = torch.full((), float("-inf"), dtype=lp.dtype, device=lp.device)  # no host copy: capturable
    score = torch.where(plan.first_valid, lp[0, plan.first_rank], neg_inf)
    scores, ranks, parent_pos = [score], [plan.first_rank], [torch.zeros_like(plan.first_rank)]
    # [L, C]: log-prob of each candidate pair's child, per depth (−inf for the padding)
    child_lp = torch.where(plan.pair_valid, lp[:, plan.rank], neg_inf)
    for d in range(1, depth_limit):
        cand = score[plan.parent_pos] + child_lp[d]
        # One small sort is one kernel on the GPU; topk would be a radix select plus a sort.
        score, pick = cand.sort(descending=True, stable=True)
        score, pick = score[:b], pick[:b]  # best first: the next depth's parent positions
        scores.append(score)
        ranks.append(plan.rank[pick])
        parent_pos.append(plan.parent_pos[pick])
    flat_score = torch.stack(scores).view(-1)  # [L·B], depth-major
    order = flat_score.sort(descending=True, stable=True).indices[:b]  # pop order
    flat_rank, flat_parent = torch.stack(ranks).view(-1), torch.stack(parent_pos).view(-1)
    return assemble(plan, root, top_ids, flat_score, flat_rank, flat_parent, order)


def assemble(
    plan: TreePlan, root: Tensor, top_ids: Tensor, score: Tensor, rank: Tensor, parent_pos: Tensor, order: Tensor
) -> DeviceTree:
    """The tree from the per-depth survivors (flat [L·B], depth-major: score, rank, parent's position
    at the depth above) and `order`, the flat indices of the best B in pop order."""
    b, k, depth_limit = plan.budget, plan.k, plan.depth_limit
    depth0 = order // b  # depth − 1
    exists = score[order] > float("-inf")
    node_tokens = torch.where(exists, top_ids.reshape(-1)[depth0 * k + rank[order]], -1)
    # Parent's node index: flat (depth, position) → pop index via the inverse of `order`.
    node_of = torch.zeros(depth_limit * b, dtype=torch.long, device=order.device)
    node_of[order] = plan.nodes
    parent_flat = ((depth0 - 1) * b + parent_pos[order]).clamp(min=0)
    node_parents = torch.where(depth0 == 0, 0, node_of[parent_flat])
    tokens = torch.cat([root.view(1), node_tokens])
    parents = torch.cat([torch.zeros_like(root.view(1)), node_parents])
    depths = torch.cat([torch.zeros_like(root.view(1)), depth0 + 1])
    return DeviceTree(tokens, parents, depths, ancestors(parents, depth_limit))


def ancestors(parents: Tensor, depth_limit: int) -> Tensor:
    """bool [n, n] ancestor-or-self closure of a parent array (root = its own parent), by squaring."""
    n = parents.shape[0]
    reach = torch.eye(n, dtype=torch.float32, device=parents.device)
    reach.scatter_(1, parents[:, None], 1.0)  # scalar fill: no host tensor, so capturable
    steps = 1
    while steps < depth_limit:  # reach covers paths of up to `steps` edges
        reach = (reach @ reach).clamp_(max=1.0)
        steps *= 2
    return reach > 0


def chain_tree(root: Tensor, chain: Tensor) -> DeviceTree:
    """DFlash: the per-depth argmaxes as one path."""
    n = chain.shape[0] + 1
    idx = torch.arange(n, device=chain.device)
    tokens = torch.cat([root.view(1), chain])
    visible = torch.ones(n, n, dtype=torch.bool, device=chain.device).tril()
    return DeviceTree(tokens, (idx - 1).clamp(min=0), idx, visible)


@dataclass
class Walk:
    path: Tensor  # [block] long: accepted node index per depth (0 past the end)
    count: Tensor  # [1] long: accepted nodes, root included (τ of the round)
    bonus: Tensor  # [1] long: the target's choice after the last accepted node


def walk(tree: DeviceTree, choices: Tensor, span: int) -> Walk:
    """Greedy walk on the device. choices[i] = the target's token after node i's path; span: the
    longest path the tree can hold, root included (the path's length).

    A node is accepted when it and all its ancestors match their parent's choice; siblings hold
    distinct tokens, so the accepted nodes form one path from the root, one per depth.
    """
    t = tree.tokens.shape[0]
    index = torch.arange(t, device=choices.device)
    matched = (tree.tokens == choices[tree.parents]) | (index == 0)  # the root is always accepted
    on_path = ~(tree.visible & ~matched[None, :]).any(-1)
    count = on_path.sum().view(1)
    slot = torch.where(on_path, tree.depths, span)  # rejected nodes all land in the spare slot
    path = torch.zeros(span + 1, dtype=torch.long, device=choices.device)
    path.scatter_(0, slot, index)
    path = path[:span]
    bonus = choices[path[count - 1]]
    return Walk(path, count, bonus)


def compact(kv: Tensor, start: Tensor, path: Tensor) -> None:
    """Move rows start + path[j] to start + j in every layer at once (kv: [layers, 2, rows, …]).

    One gather and one scatter over all layers; the gather copies first, so overlapping moves are
    safe. Rows past the accepted count receive scratch that the next verify overwrites.
    """
    dst = start + torch.arange(path.shape[0], device=path.device)
    kv.index_copy_(2, dst, kv.index_select(2, start + path))


def context_chain(hist: Tensor, start: Tensor, ngram: int, length: int) -> Tensor:
    """`engine.tree.context_chain` on the device: hist [rows] long holds the text, hist[start] its last
    token (the bonus). Returns [length] long, all −1 when nothing matched."""
    rows = hist.shape[0]
    ends = torch.arange(rows, device=hist.device)  # where an earlier match ends
    last = start.view(())
    run = ends < last
    matched = torch.zeros(rows, dtype=torch.long, device=hist.device)
    for k in range(ngram):  # run: the match still extends k tokens back
        run = run & (ends >= k) & (hist[(ends - k).clamp(min=0)] == hist[(last - k).clamp(min=0)])
        matched += run
    best = torch.where(matched > 0, matched * rows + ends, -1).max()  # longest, then latest
    end = best % rows
    at = end + 1 + torch.arange(length, device=hist.device) % (last - end).clamp(min=1)  # a loop past the end
    return torch.where(best >= 0, hist[at.clamp(max=rows - 1)], -1)


def graft(tree: DeviceTree, chain: Tensor) -> None:
    """`engine.tree.graft` in place and in fixed shapes: the tree's last len(chain) nodes are lookup
    slots after the drafted ones; the chain's new nodes fill them in order, unused slots get token −1
    (they never match) and see only the root and themselves."""
    tokens, parents, depths, visible = tree.tokens, tree.parents, tree.depths, tree.visible
    n = tokens.shape[0]
    budget = n - 1 - chain.shape[0]  # drafted nodes
    index = torch.arange(n, device=tokens.device)
    slots = index > budget
    tokens.masked_fill_(slots, -1)
    parents.masked_fill_(slots, 0)
    depths.masked_fill_(slots, 1)
    fresh = (index[None, :] == 0) | (index[None, :] == index[:, None])  # the root and itself
    visible.copy_(torch.where(slots[:, None], fresh, visible))
    node = torch.zeros((), dtype=torch.long, device=tokens.device)
    used = torch.zeros((), dtype=torch.long, device=tokens.device)
    alive = torch.ones((), dtype=torch.bool, device=tokens.device)
    for d in range(chain.shape[0]):
        token = chain[d]
        alive = alive & (token >= 0)
        hit = (parents == node) & (tokens == token) & (index > 0)
        found = hit.any()
        new = budget + 1 + used
        make = (alive & ~found).view(1)
        at = new.clamp(max=n - 1).view(1)
        tokens.index_copy_(0, at, torch.where(make, token.view(1), tokens[at]))
        parents.index_copy_(0, at, torch.where(make, node.view(1), parents[at]))
        depths.index_copy_(0, at, torch.where(make, torch.full_like(at, d + 1), depths[at]))
        row = visible[node] | (index == new)
        visible.index_copy_(0, at, torch.where(make[:, None], row[None], visible[at]))
        node = torch.where(alive, torch.where(found, torch.where(hit, index, 0).max(), new), node)
        used = used + make.view(()).long()
