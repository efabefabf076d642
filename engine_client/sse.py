"""Server-sent events decoder on raw bytes (WHATWG "event stream" rules), independent of any HTTP library.

Feed it bytes as they arrive; it returns the events completed by those bytes. Lines end in CRLF, LF or
CR; `data` lines of one event are joined by "\\n"; a blank line dispatches; lines starting with ":"
are comments (keep-alives). A CR at the very end of a chunk is held back, since it may be the first
half of a CRLF split across reads.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent", "iter_events"]


@dataclass(frozen=True)
class ServerSentEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None

    @property
    def is_done(self) -> bool:
        """OpenAI-style end of stream marker."""
        return self.data.strip() == "[DONE]"


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        self._buffer += self._text.decode(chunk)
        return list(self._drain(final=False))

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: complete a trailing line, and dispatch an event not followed by a blank line."""
        self._buffer += self._text.decode(b"", final=True)
        events = list(self._drain(final=True))
        if self._buffer:
            events.extend(self._line(self._buffer))
            self._buffer = ""
        events.extend(self._line(""))
        return events

    def _drain(self, final: bool) -> Iterator[ServerSentEvent]:
        while True:
            cut = _line_end(self._buffer, final)
            if cut is None:
                return
            end, width = cut
            line, self._buffer = self._buffer[:end], self._buffer[end + width:]
            yield from self._line(line)

    def _line(self, line: str) -> Iterator[ServerSentEvent]:
        if line == "":
            if self._data:
                yield ServerSentEvent("\n".join(self._data), self._event or "message", self._id, self._retry)
            self._data, self._event = [], ""
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)


def _line_end(buffer: str, final: bool) -> tuple[int, int] | None:
    """(index, width) of the first line terminator, or None when no complete line is buffered."""
    for i, ch in enumerate(buffer):
        if ch == "\n":
            return i, 1
        if ch == "\r":
            if i + 1 < len(buffer):
                return i, 2 if buffer[i + 1] == "\n" else 1
            return (i, 1) if final else None  # a lone CR at the end may be half of CRLF
    return None


def iter_events(chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """All events of a byte stream (convenience for tests and non-timed uses)."""
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.flush()
