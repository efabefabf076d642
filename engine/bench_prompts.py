"""Benchmark prompts of an exact token length, cut from the held-out standard-library modules.

Each prompt ends just after a `def …:` line (the model is asked for a function body) and holds
exactly `tokens` tokens of the code before it; when a module is too short the held-out modules
are read as one text, so the prompt extends back into the previous module.
"""

from __future__ import annotations

from engine.tokenizer import Tokenizer


def context_prompts(texts: dict[str, str], tokenizer: Tokenizer, count: int, tokens: int) -> list[list[int]]:
    """`count` prompts of exactly `tokens` token ids, spread evenly over the def lines."""
    if tokens < 1 or count < 1:
        raise ValueError(f"prompt length and count must be >= 1 (got {tokens}, {count})")
    text = "".join(texts[name] for name in sorted(texts))
    ends, offset = [], 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if line.lstrip().startswith("def ") and line.rstrip().endswith(":"):
            ends.append(offset)
    chars = 8 * tokens + 400  # well above the ~3 characters per token of this tokenizer
    usable = [e for e in ends if e >= chars // 2]
    step = max(1, len(usable) // count)
    prompts: list[list[int]] = []
    for end in usable[::step]:
        ids = tokenizer.encode(text[max(0, end - chars) : end], add_bos=False)
        head = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        if len(ids) >= tokens - len(head):
            prompts.append(head + ids[len(ids) - (tokens - len(head)) :])
        if len(prompts) == count:
            break
    if len(prompts) < count:
        raise ValueError(f"the held-out code gives only {len(prompts)} prompts of {tokens} tokens")
    return prompts
