"""Counters of a running application or test driver."""

from __future__ import annotations

from collections import Counter

DROPPED = "dropped-records-total"


class Metrics:
    """Named counters; ``dropped-records-total`` plus one ``dropped-records-<reason>`` each."""

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def dropped(self, reason: str, n: int = 1) -> None:
        self.counters[DROPPED] += n
        self.counters[f"dropped-records-{reason}"] += n

    def merge(self, other: dict[str, int]) -> None:
        self.counters.update(other)

    def snapshot(self) -> dict[str, int]:
        out = {DROPPED: 0, "process-total": 0, "punctuate-total": 0}
        out.update(self.counters)
        return out
