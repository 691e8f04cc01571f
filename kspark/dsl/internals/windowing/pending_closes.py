"""The sessions an on_window_close session aggregation has stored but not yet forwarded."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

#: a session awaiting its close: ``(end, start, key)``
Pending = tuple[int, int, Any]


class PendingCloses:
    """Sessions ``(end, start, key)`` awaiting emission, taken in ``(end, start, key)`` order.

    A heap of entries with a set of the live ones: a discarded entry stays in the heap until
    its turn comes and is skipped then (an entry added again after a discard is taken once)."""

    def __init__(self, entries: Iterable[Pending] = ()) -> None:
        self._live: set[Pending] = set(entries)
        self._heap: list[Pending] = list(self._live)
        heapq.heapify(self._heap)

    def add(self, entry: Pending) -> None:
        if entry not in self._live:
            self._live.add(entry)
            heapq.heappush(self._heap, entry)

    def discard(self, entry: Pending) -> None:
        self._live.discard(entry)

    def __len__(self) -> int:
        return len(self._live)

    def take_ending_before(self, close: int) -> list[Pending]:
        """Remove and return, in order, the entries whose end is below ``close``."""
        heap, live = self._heap, self._live
        out = []
        while heap and heap[0][0] < close:
            entry = heapq.heappop(heap)
            if entry in live:
                live.remove(entry)
                out.append(entry)
        return out
