'''The canary text every probe prompt is cut from: original prose and Python, written for Spectator.

Natural text and code, never random token ids, because random ids destroy speculative acceptance
(DESIGN §4). The text is fixed: change a single character and CANARY_VERSION must change too, since
stored τ and tok/s are only comparable between probes that used the same canary.
'''

from __future__ import annotations

import hashlib

__all__ = ["CANARY_TEXT", "CANARY_VERSION", "canary_sha256"]

CANARY_VERSION = "2026.11-1"

_PROSE = """\
The harbour office opened at six, an hour before the first ferry, and the clerk who kept it had a
habit of writing the weather on a slate by the door. Nobody had asked her to. The slate said wind
from the west, a low swell, fog lifting by nine; underneath, in smaller letters, it said that the
coffee machine was working again and that the lost umbrella from Tuesday was still behind the desk.

Most mornings the same people came through. A baker carried trays of bread to the island cafe and
came back empty-handed on the noon boat. Two students with heavy bags crossed to the research
station, argued about the tide tables the whole way over, and were usually both wrong. An old man
with a folding chair went out to fish from the end of the pier and never seemed to catch anything,
though he always said the day had been a good one.

The clerk kept a ledger of every crossing: the time the ferry left, the time it arrived, how many
passengers, how much freight, and a column for remarks. The remarks were the interesting part. One
said that a seal had followed the boat halfway across. Another said that the engine had made a new
noise, a kind of polite cough, and that the engineer had listened to it with his head tilted before
deciding it was nothing. A third, written in a hurry, said only: fog, slow, everyone patient.

When the harbour board asked her why the crossings had grown slower over the summer, she did not
guess. She opened the ledger, added up the minutes week by week, and drew a line on squared paper.
The line was flat for a month and then stepped down, all at once, on the week the new fuel supplier
started. It had nothing to do with the weather, the passengers or the freight. The board changed the
supplier back, and the line went up again. She pinned the squared paper beside the slate, and it
stayed there for years, slowly going yellow, a small reminder that a steady record answers questions
that a good memory cannot.

"""

_CODE = '''\
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class Crossing:
    """One ferry crossing as the harbour ledger records it."""

    departed: datetime
    arrived: datetime
    passengers: int
    freight_kg: float = 0.0
    remarks: list[str] = field(default_factory=list)

    @property
    def minutes(self) -> float:
        return (self.arrived - self.departed).total_seconds() / 60


def weekly_means(crossings: list[Crossing]) -> dict[str, float]:
    """Mean crossing time per ISO week, in minutes, sorted by week."""
    buckets: dict[str, list[float]] = {}
    for c in crossings:
        year, week, _ = c.departed.isocalendar()
        buckets.setdefault(f"{year}-W{week:02d}", []).append(c.minutes)
    return {week: sum(v) / len(v) for week, v in sorted(buckets.items())}


def first_step(series: dict[str, float], threshold: float = 0.05) -> str | None:
    """The first week whose mean differs from the running baseline by more than `threshold`."""
    baseline: list[float] = []
    for week, value in series.items():
        if len(baseline) >= 3:
            reference = sorted(baseline)[len(baseline) // 2]
            if abs(value - reference) / reference > threshold:
                return week
        baseline.append(value)
    return None


def slow_crossings(crossings: list[Crossing], limit: timedelta) -> list[Crossing]:
    """Crossings that took longer than `limit`, slowest first."""
    slow = [c for c in crossings if c.arrived - c.departed > limit]
    return sorted(slow, key=lambda c: c.minutes, reverse=True)


class Ledger:
    def __init__(self) -> None:
        self._rows: list[Crossing] = []

    def record(self, crossing: Crossing) -> None:
        if crossing.arrived <= crossing.departed:
            raise ValueError("a ferry cannot arrive before it leaves")
        self._rows.append(crossing)

    def remarks_containing(self, word: str) -> list[str]:
        word = word.lower()
        return [r for c in self._rows for r in c.remarks if word in r.lower()]

    def __len__(self) -> int:
        return len(self._rows)

'''

CANARY_TEXT = _PROSE + _CODE


def canary_sha256() -> str:
    """Digest of the text, stored with each probe so a silent edit shows up as a different canary."""
    return hashlib.sha256(CANARY_TEXT.encode()).hexdigest()
