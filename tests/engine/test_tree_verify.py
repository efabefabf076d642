"""One verify pass over a tree must give each node the logits of its ancestor path run alone."""

from __future__ import annotations

import torch

from engine.decode import Decoder
from engine.tree import Tree, visibility


def random_tree(gen: torch.Generator, size: int, vocab: int) -> Tree:
    parents, depths, tokens = [-1], [0], [int(torch.randint(4, vocab, (1,), generator=gen))]
    for i in range(1, size + 1):
        p = int(torch.randint(0, i, (1,), generator=gen))
        parents.append(p)
        depths.append(depths[p] + 1)
        tokens.append(int(torch.randint(4, vocab, (1,), generator=gen)))
    return Tree(tokens, parents, depths)


def path_to(tree: Tree, node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(tree.tokens[node])
        node = tree.parents[node]
    return path[::-1]


def test_it_gives_every_node_the_logits_of_its_path_alone(decoder: Decoder) -> None:
    target = decoder.target
    gen = torch.Generator().manual_seed(5)
    prompt = decoder.tokenizer.encode("def parse(line):\n    key, _, value = line.partition('=')\n")
    cache, _ = decoder._caches(24)
    tree = random_tree(gen, 24, target.config.vocab_size)
    assert any(tree.parents[i] != i - 1 for i in range(1, 25)), "the tree should branch"
    n = len(prompt)
    with torch.inference_mode():  # the decoder's caches are inference tensors
        target(torch.tensor([prompt]), torch.arange(n)[None], cache=cache)
        mask = torch.ones(25, n + 25, dtype=torch.bool)
        mask[:, n:] = torch.from_numpy(visibility(tree.parents))
        hidden, _ = target(
            torch.tensor([tree.tokens]), n + torch.tensor([tree.depths]), cache=cache, start=n, mask=mask
        )
        tree_logits = target.logits(hidden[0])
        for node in range(25):
            seq = prompt + path_to(tree, node)
            alone, _ = target(torch.tensor([seq]), torch.arange(len(seq))[None])
            assert torch.allclose(tree_logits[node], target.logits(alone[0, -1]), atol=1e-4), node
