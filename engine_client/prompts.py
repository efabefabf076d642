"""Prompts of an exact token count: a unique salt first, then the canary text, cycled as needed.

The salt (DESIGN §4 "prefix caches") is a few common words drawn from a per-process counter, so every
request's prompt differs from its first token on and no prefix cache can reuse another request's
prefill. Every salt has the same token length (checked with the tokenizer when the server has one).

Exact length:
  1. count tokens with the server's tokenize endpoint when it has one, else by a `max_tokens=1`
     completion and its `usage.prompt_tokens` (calibration);
  2. search the number of canary characters, proportional steps then bisection, starting from the
     length found for the last prompt of the same size (usually one count per prompt);
  3. if one more character jumps past the target (a merge), try a few one-character endings.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from engine_client.canary import CANARY_TEXT

__all__ = ["Prompt", "PromptBuilder", "make_salt"]

# Short, common words: single tokens in most BPE vocabularies, so salts keep one token length.
_WORDS = ("the", "and", "for", "with", "from", "this", "that", "not", "all", "one", "two", "new", "old", "set",
          "get", "run", "key", "map", "day", "end", "top", "low", "way", "use", "own", "see", "name", "value",
          "data", "file", "list", "type")
_SALT_WORDS = 4
_counter = itertools.count(random.SystemRandom().randrange(len(_WORDS) ** _SALT_WORDS))
MAX_COUNTS = 40
_ENDINGS = (" ", ".", "\n", " a", ",", "x")


def make_salt() -> str:
    """A salt unique within this process (and, by its random start, very likely across processes)."""
    n = next(_counter) % len(_WORDS) ** _SALT_WORDS
    words = []
    for _ in range(_SALT_WORDS):
        n, r = divmod(n, len(_WORDS))
        words.append(_WORDS[r])
    return "Probe " + " ".join(words) + ".\n\n"


@dataclass(frozen=True)
class Prompt:
    text: str
    tokens: int  # as counted by the server
    salt: str
    exact: bool


class PromptBuilder:
    """Builds prompts of `n` tokens; `count(text)` returns the server's prompt token count for `text`.

    `count` may raise ValueError for a text that is too long for the server; the search treats that as
    "more than n tokens".
    """

    def __init__(self, count: Callable[[str], int], *, tokenizer_backed: bool, text: str = CANARY_TEXT) -> None:
        self.count = count
        self.tokenizer_backed = tokenizer_backed
        self.text = text
        self.calls = 0
        self._chars_for: dict[int, int] = {}
        self._salt_tokens: int | None = None

    def _count(self, text: str) -> int | None:
        self.calls += 1
        try:
            return self.count(text)
        except ValueError:
            return None  # too long for the server

    def _salt(self) -> str:
        """A fresh salt of the usual token length: the most common length of the first few salts drawn."""
        if not self.tokenizer_backed:
            return make_salt()
        if self._salt_tokens is None:
            lengths = [self._count(make_salt()) for _ in range(5)]
            self._salt_tokens = max(set(lengths), key=lengths.count)
        for _ in range(50):
            salt = make_salt()
            if self._count(salt) == self._salt_tokens:
                return salt
        raise RuntimeError(f"could not draw a salt of {self._salt_tokens} tokens")

    def build(self, n: int) -> Prompt:
        """A prompt of exactly `n` tokens if reachable (steps 1–3 of the module docstring)."""
        if n < 8:
            raise ValueError(f"a prompt needs at least 8 tokens, not {n}")
        salt = self._salt()
        body = self.text
        k = self._chars_for.get(n, n * 3)
        lo: tuple[int, int] | None = None  # (chars, tokens) with tokens < n
        hi: int | None = None  # chars with tokens > n
        for _ in range(MAX_COUNTS):
            while len(body) < k + 1:
                body += "\n" + self.text
            c = self._count(salt + body[:k])
            if c == n:
                self._chars_for[n] = k
                return Prompt(salt + body[:k], n, salt, True)
            if c is not None and c < n:
                lo = (k, c) if lo is None or k > lo[0] else lo
            else:
                hi = k if hi is None or k < hi else hi
            if lo is not None and hi is not None and hi - lo[0] <= 1:
                break
            if c is None:
                nk = (lo[0] + k) // 2 if lo is not None else k // 2
            else:
                nk = k + round((n - c) * k / max(c, 1))
            if lo is not None:
                nk = max(nk, lo[0] + 1)
            if hi is not None:
                nk = min(nk, hi - 1)
            k = max(0, nk if nk != k else k + (1 if c is not None and c < n else -1))
        if lo is not None:
            for ending in _ENDINGS:
                text = salt + body[:lo[0]] + ending
                if self._count(text) == n:
                    return Prompt(text, n, salt, True)
            return Prompt(salt + body[:lo[0]], lo[1], salt, False)
        raise RuntimeError(f"could not build a prompt of {n} tokens (the server refused every length tried)")
