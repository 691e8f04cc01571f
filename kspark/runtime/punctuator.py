"""A task's punctuation schedules on stream time and on wall-clock time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark.processor.punctuation import (
    Cancellable,
    PunctuationQueue,
    PunctuationSchedule,
    PunctuationType,
)


class Punctuator:
    """The schedules of one task. Due times restored from a checkpoint apply to the schedule
    with the same key, type and interval when a processor schedules it again at ``init``."""

    def __init__(self, wall_clock: Callable[[], int]) -> None:
        self.wall_clock_ms = wall_clock
        #: the stream-time schedules (``stream.next_due``: the earliest due time)
        self.stream = PunctuationQueue()
        self._wall = PunctuationQueue()
        self._restored: dict[str, tuple[str, int, int]] = {}

    def restore(self, dues: dict[str, tuple[str, int, int]]) -> None:
        """Due times saved by :meth:`dues`: schedule key -> (type, interval, due)."""
        self._restored = dict(dues)

    def dues(self) -> dict[str, tuple[str, int, int]]:
        """Every schedule's key -> (type, interval, next due time), for the checkpoint."""
        return {s.key: (s.type.value, s.interval, s.due)
                for queue in (self.stream, self._wall) for s in queue.schedules()}

    def schedule(self, node: str, slot: int, interval: int, type: PunctuationType,
                 callback: Callable[[int], Any]) -> Cancellable:
        if type is PunctuationType.STREAM_TIME:
            due, queue = 0, self.stream
        else:
            due, queue = self.wall_clock_ms() + interval, self._wall
        schedule = PunctuationSchedule(node, slot, type, interval, due, callback)
        restored = self._restored.pop(schedule.key, None)
        if restored is not None and restored[0] == type.value and restored[1] == interval:
            schedule.due = restored[2]
        queue.add(schedule)
        return schedule.handle

    @property
    def has_stream_time_schedules(self) -> bool:
        return bool(self.stream.schedules())

    def punctuate_stream_time(self, stream_time: int,
                              fire: Callable[[PunctuationSchedule, int], None]) -> bool:
        """Fire due stream-time schedules; only once the task has a stream time."""
        if stream_time < 0:
            return False
        return self.stream.may_punctuate(stream_time, fire)

    def punctuate_wall_clock(self, now: int,
                             fire: Callable[[PunctuationSchedule, int], None]) -> bool:
        return self._wall.may_punctuate(now, fire)

    def next_wall_clock_due(self) -> int | None:
        return min((s.due for s in self._wall.schedules()), default=None)
