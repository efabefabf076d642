"""Incremental text for streamed responses, and the SSE framing.

A streamed response must add up to exactly the non-streamed text. Two things in the tail of the
text decoded so far may still change, so they are held back until the next round or the end:
  1. an incomplete UTF-8 sequence, which the byte-level decoder shows as trailing U+FFFD;
  2. a suffix that is a prefix of a stop string: if the stop string completes, the text is cut
     before it and those characters must never have been sent.
Whatever was sent is therefore always a prefix of the final text (the engine cuts the final text
at the first stop string, and a stop string can only start inside the held-back tail).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

REPLACEMENT = "\ufffd"


def sse(payload: dict[str, Any] | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"


DONE = sse("[DONE]")


def cut_at_stop(text: str, stops: list[str]) -> str:
    cut = min((text.index(s) for s in stops if s in text), default=len(text))
    return text[:cut]


def stable_prefix(text: str, stops: list[str]) -> str:
    """The part of `text` that later tokens cannot change (steps 1–2 of the module docstring)."""
    text = text.rstrip(REPLACEMENT)
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return text[: len(text) - hold]


class TextStreamer:
    """Turns 'all tokens so far' into text deltas; `finish` sends the rest of the final text."""

    def __init__(self, decode: Callable[[list[int]], str], stops: list[str]) -> None:
        self.decode = decode
        self.stops = stops
        self.sent = ""

    def update(self, tokens: list[int]) -> str:
        safe = stable_prefix(cut_at_stop(self.decode(tokens), self.stops), self.stops)
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent):], safe
        return delta

    def finish(self, final_text: str) -> str:
        # By the docstring's argument `sent` is a prefix of the final text; never re-send if it were not.
        delta = final_text[len(self.sent):] if final_text.startswith(self.sent) else ""
        self.sent = final_text
        return delta
