"""Sliding-window aggregation (docs/semantics.md §3), as Kafka Streams'
KStreamSlidingWindowAggregate.

Windows are ``[start, start + diff]``, both ends inclusive, and exist only where records
enter or leave them: each record ``t`` has its *left* window ``[t - diff, t]`` and, when later
records lie within ``diff`` of it, its *right* window ``[t + 1, t + 1 + diff]``. Records with
``t < diff`` share the window ``[0, diff]`` instead of a left window with a negative start.
Each stored window keeps its aggregate with the largest record timestamp in it, which is also
its result's timestamp. With ``close = observed stream time - grace`` a window is closed once
``end < close``: the record is dropped (and counted) for each closed window it would update
(once if all its windows are closed) and still updates the open ones.
"""

from __future__ import annotations

from typing import Any

from kspark.dsl.internals.windowing.common import (
    LAST_EMIT,
    WindowedAggregateBase,
    drop_expired,
    drop_null,
    materialized_options,
    observe,
    resolve_retention,
    window_store_builder,
)
from kspark.records import Record, ValueAndTimestamp, event_time
from kspark.state.builders import StoreBuilder
from kspark.windows import SlidingWindows, Window, Windowed


def sliding_window_store_builder(
    store_name: str, windows: SlidingWindows, materialized: Any
) -> StoreBuilder:
    """The window store of a sliding-window aggregation (window size = the time difference).

    Retention defaults to 2 * diff + grace (a record looks back at windows starting up to
    2 * diff before it); a smaller ``Materialized`` retention raises ``ValueError``. The store
    is built with at least 2 * diff + grace + 1 ms, since it expires windows with
    ``start <= observed - retention`` and a record at the close time still needs the window
    starting 2 * diff before it."""
    opts = materialized_options(materialized)
    minimum = windows.default_retention_ms
    retention = resolve_retention(
        store_name, opts["retention"], minimum, "twice the time difference plus the grace period"
    )
    return window_store_builder(
        store_name, opts, max(retention, minimum + 1), windows.time_difference_ms)


class SlidingWindowAggregateProcessor(WindowedAggregateBase[SlidingWindows]):
    """Aggregates records into sliding windows."""

    windows_type = SlidingWindows

    def process(self, record: Record) -> None:
        if drop_null(self.context, record):
            return
        ts = event_time(record)
        diff = self.windows.time_difference_ms
        observed = observe(self.state, ts)
        close = observed - self.windows.grace_ms
        self._observed, self._close = observed, close
        pending = self._pending_final(close) if self.emit_final else None
        if ts + diff < close:
            # every window the record could belong to ends before the close time
            drop_expired(self.context, record, Window(max(0, ts - diff), ts), close, observed)
        elif ts < diff:
            self._process_early(record)
        else:
            self._process_in_order(record)
        if pending is not None:
            self.emit_final_results(pending, close, record.headers)

    # -- window updates ------------------------------------------------------------------------
    def _update(self, record: Record, start: int, base: ValueAndTimestamp | None, old: Any) -> None:
        """Aggregate ``record`` into the window at ``start`` whose current content is ``base``
        (``None``: empty) and whose stored value is ``old``; drop it if the window is closed."""
        window = Window(start, start + self.windows.time_difference_ms)
        if window.end < self._close:
            drop_expired(self.context, record, window, self._close, self._observed)
            return
        ts = event_time(record)
        if base is None:
            agg, new_ts = self.initializer(), ts
        else:
            agg, new_ts = base.value, max(ts, base.timestamp)
        new = self.aggregator(record.key, record.value, agg)
        # a delete is logged at the record's time (as time windows, see there)
        self.store.put(record.key, new, start, ts if new is None else new_ts)
        self.forward_update(Windowed(record.key, window), new, old, new_ts, record.headers)

    def _create_right_window(self, record: Record, content: ValueAndTimestamp) -> None:
        """Store the record's right window holding ``content`` (the records after it)."""
        start = event_time(record) + 1
        window = Window(start, start + self.windows.time_difference_ms)
        self.store.put(record.key, content.value, start, content.timestamp)
        self.forward_update(Windowed(record.key, window), content.value, None, content.timestamp,
                            record.headers)

    def _process_in_order(self, record: Record) -> None:
        """Kafka Streams' ``processReverse`` (the path it takes with its built-in stores, which
        all iterate backwards): the record's existing windows newest first, so a record updates
        its right windows before its left window, and stops early when its left window already
        holds a record at its timestamp."""
        key, ts = record.key, event_time(record)
        diff = self.windows.time_difference_ms
        starts: set[int] = set()
        left_agg: ValueAndTimestamp | None = None
        right_agg: ValueAndTimestamp | None = None
        left_exists = right_exists = False
        previous_ts: int | None = None
        found = list(self.store.fetch_range_with_timestamps(key, max(0, ts - 2 * diff), ts + 1))
        for start, stored in reversed(found):
            starts.add(start)
            end = start + diff
            if start == ts + 1:
                right_exists = True
            elif end > ts:
                if right_agg is None:
                    right_agg = stored
                self._update(record, start, stored, stored.value)
            elif end == ts:
                left_exists = True
                self._update(record, start, stored, stored.value)
                if stored.timestamp >= ts:
                    return  # its windows exist already: nothing to create
                previous_ts = stored.timestamp
            else:
                left_agg, previous_ts = stored, stored.timestamp
                break
        # the previous record's right window, if the record falls into it and it is missing
        if previous_ts is not None:
            previous_right = previous_ts + 1
            if previous_right not in starts and previous_right + diff >= ts:
                self._update(record, previous_right, None, None)
        if not left_exists:
            if previous_ts is not None and ts - diff <= previous_ts and left_agg is not None:
                base = ValueAndTimestamp(left_agg.value, ts)
            else:
                base = None
            self._update(record, ts - diff, base, None)
        if not right_exists and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(record, right_agg)

    def _process_early(self, record: Record) -> None:
        """A record with ``ts < diff``: its left window is ``[0, diff]``."""
        key, ts = record.key, event_time(record)
        combined: ValueAndTimestamp | None = None
        right_agg: ValueAndTimestamp | None = None
        right_exists = False
        starts: set[int] = set()
        previous_ts: int | None = None
        for start, stored in self.store.fetch_range_with_timestamps(key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = stored
                if stored.timestamp < ts:
                    previous_ts = stored.timestamp
            elif start <= ts:
                right_agg = stored
                self._update(record, start, stored, stored.value)
            elif start == ts + 1:
                right_exists = True
            else:  # pragma: no cover - the fetch range excludes it
                raise AssertionError(f"unexpected sliding window start {start} for record {ts}")
        # with nothing else found, [0, diff] holds only records after this one
        if right_agg is None and combined is not None and combined.timestamp > ts:
            right_agg = combined
        if not right_exists and right_agg is not None and right_agg.timestamp > ts:
            self._create_right_window(record, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._update(record, previous_ts + 1, None, None)
        self._update(record, 0, combined, None if combined is None else combined.value)

    # -- on_window_close -------------------------------------------------------------------------
    def _pending_final(self, close: int) -> list[tuple[Windowed, Any, int]] | None:
        """Windows closed since the last emission (``start + diff < close``), or ``None`` if
        the close time has not moved."""
        last = self.state.get(LAST_EMIT)
        if last is not None and close <= last:
            return None
        diff = self.windows.time_difference_ms
        lo = 0 if last is None else max(0, last - diff)
        return self.closed_windows(lo, close - diff - 1)
