"""Logging of dropped records that a person can read: each drop at DEBUG, and per task and
reason a WARNING summary at most every :data:`SUMMARY_INTERVAL_S` seconds, with the number of
drops since the last summary and one example with its coordinates. The first drop of a task and
reason is summarised at once; later ones when the interval has passed and a record is dropped or
the task commits. Drops are always counted in the metrics, whatever is logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("kspark.task")

#: least time between two summaries of one task and reason
SUMMARY_INTERVAL_S = 5.0


@dataclass
class _Pending:
    count: int = 0
    example: str = ""
    last_summary: float = float("-inf")


class DropLog:
    """Counts of dropped records since their last summary, per ``(task id, reason)``."""

    def __init__(
        self, interval_s: float = SUMMARY_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        #: drops not summarised yet, per (task id, reason); empty: nothing to summarise
        self.pending: dict[tuple[str, str], _Pending] = {}
        self._lock = threading.Lock()

    def dropped(self, task_id: str, reason: str, detail: str) -> None:
        """Note one dropped record (``detail`` names it: topic, partition, offset, key...)."""
        log.debug("task %s: dropped record (%s): %s", task_id, reason, detail)
        with self._lock:
            entry = self.pending.setdefault((task_id, reason), _Pending())
            entry.count += 1
            if not entry.example:
                entry.example = detail
            self._summarise_due(self._clock(), [(task_id, reason)])

    def flush_due(self, task_id: str | None = None) -> None:
        """Summarise what is pending (of one task, or all) whose interval has passed."""
        if not self.pending:  # nothing dropped yet: no lock taken
            return
        with self._lock:
            keys = [k for k in self.pending if task_id is None or k[0] == task_id]
            self._summarise_due(self._clock(), keys)

    def _summarise_due(self, now: float, keys: list[tuple[str, str]]) -> None:
        for key in keys:
            entry = self.pending[key]
            if entry.count and now - entry.last_summary >= self.interval_s:
                log.warning(
                    "task %s: %d record(s) dropped (%s) since the last summary; e.g. %s",
                    key[0], entry.count, key[1], entry.example,
                )
                entry.count, entry.example, entry.last_summary = 0, "", now


#: the process's drop log (Spark's Python workers run many task instances one after another)
DROPS = DropLog()
