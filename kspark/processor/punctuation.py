"""Punctuation schedules and the queue that fires them (docs/semantics.md §5)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from enum import Enum
from typing import Any, Final

#: the due time of a queue without schedules: the largest int the compiled core keeps unboxed
#: (later than any real timestamp; a stream time past it only makes the queue look at its
#: empty heap)
NEVER: Final = (1 << 62) - 1

MIN_INTERVAL_MS: Final = 1


class PunctuationType(Enum):
    """What clock a punctuation follows."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Cancellable:
    """Handle returned by ``context.schedule``; ``cancel()`` stops the schedule for good."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class PunctuationSchedule:
    """One schedule: a callback of a processor node, due at ``due`` and every ``interval``."""

    __slots__ = ("callback", "due", "handle", "interval", "node", "slot", "type")

    def __init__(
        self,
        node: str,
        slot: int,
        type: PunctuationType,
        interval: int,
        due: int,
        callback: Callable[[int], Any],
    ) -> None:
        self.node = node
        self.slot = slot  # n-th schedule of this node: identifies it across restarts
        self.type = type
        self.interval = interval
        self.due = due
        self.callback = callback
        self.handle = Cancellable()

    @property
    def key(self) -> str:
        return f"{self.node}#{self.slot}"

    def next_due(self, now: int) -> int:
        """The next due time after firing at ``now``; missed intervals are skipped, phase kept."""
        nxt = self.due + self.interval
        if now >= nxt:
            missed = (now - self.due) // self.interval
            nxt = self.due + (missed + 1) * self.interval
        return nxt


def check_interval(interval_ms: int) -> None:
    if interval_ms < MIN_INTERVAL_MS:
        raise ValueError("The minimum supported scheduling interval is 1 millisecond")


class PunctuationQueue:
    """Schedules of one clock, earliest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, PunctuationSchedule]] = []
        self._seq = itertools.count()
        #: the earliest due time in the queue (a cancelled schedule's too), or "never"
        self.next_due: int = NEVER

    def add(self, schedule: PunctuationSchedule) -> None:
        heapq.heappush(self._heap, (schedule.due, next(self._seq), schedule))
        self.next_due = self._heap[0][0]

    def schedules(self) -> list[PunctuationSchedule]:
        return [s for _, _, s in self._heap if not s.handle.cancelled]

    def may_punctuate(self, now: int, fire: Callable[[PunctuationSchedule, int], None]) -> bool:
        """Fire every schedule with ``due <= now`` (with ``now``, not the due time) and
        reschedule it from its due time. Returns whether anything fired."""
        if now < self.next_due:
            return False
        fired = False
        while self._heap and self._heap[0][0] <= now:
            _, _, schedule = heapq.heappop(self._heap)
            if schedule.handle.cancelled:
                continue
            fire(schedule, now)
            fired = True
            if not schedule.handle.cancelled:
                schedule.due = schedule.next_due(now)
                heapq.heappush(self._heap, (schedule.due, next(self._seq), schedule))
        self.next_due = self._heap[0][0] if self._heap else NEVER
        return fired
