"""Tumbling and hopping time-window aggregation (docs/semantics.md §3).

A record belongs to every window whose start is in ``(ts - size, ts]`` and ``>= 0``. With
``close = observed stream time - grace``, a window is closed once ``window.end <= close``: the
record is dropped (and counted) for each of its closed windows and still updates the open ones.
A window's result carries the largest record timestamp in it. ``on_window_update`` forwards
``Change(new, old)`` per update (through the store's cache when caching is on);
``on_window_close`` forwards each window once, as ``Change(final, None)``, once it is closed.
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
from kspark.records import Record, event_time
from kspark.state.builders import StoreBuilder
from kspark.windows import TimeWindows, Windowed


def time_window_store_builder(
    store_name: str, windows: TimeWindows, materialized: Any
) -> StoreBuilder:
    """The window store of a time-windowed aggregation: retention defaults to size + grace
    (a smaller ``Materialized`` retention raises ``ValueError``); caching and logging follow
    the ``Materialized`` (both on by default)."""
    opts = materialized_options(materialized)
    retention = resolve_retention(
        store_name,
        opts["retention"],
        windows.default_retention_ms,
        "the window size plus the grace period",
    )
    return window_store_builder(store_name, opts, retention, windows.size_ms)


class TimeWindowAggregateProcessor(WindowedAggregateBase[TimeWindows]):
    """Aggregates records into tumbling or hopping windows (docs/semantics.md §3)."""

    windows_type = TimeWindows

    def process(self, record: Record) -> None:
        if drop_null(self.context, record, values=False):
            return
        key, value, ts = record.key, record.value, event_time(record)
        observed = observe(self.state, ts)
        close = observed - self.windows.grace_ms
        # Closed windows are collected before this record writes the store: its writes only
        # touch open windows, and the store may expire closed ones as its time advances.
        pending = self._pending_final(close) if self.emit_final else None
        for window in self.windows.windows_for(ts):
            if window.end <= close:
                drop_expired(self.context, record, window, close, observed, False)
                continue
            stored = self.store.fetch_with_timestamp(key, window.start)
            if stored is None:
                old, base, new_ts = None, self.initializer(), ts
            else:
                old, base, new_ts = stored.value, stored.value, max(ts, stored.timestamp)
            new = self.aggregator(key, value, base)
            # a delete (the aggregator returned None) is logged at the record's time, as Kafka
            # Streams' ChangeLoggingTimestampedWindowBytesStore#log logs a null value
            self.store.put(key, new, window.start, ts if new is None else new_ts)
            self.forward_update(Windowed(key, window), new, old, new_ts, record.headers)
        if pending is not None:
            self.emit_final_results(pending, close, record.headers)

    def _pending_final(self, close: int) -> list[tuple[Windowed, Any, int]] | None:
        """Windows closed since the last emission (``end <= close``), or ``None`` if the close
        time has not moved."""
        last = self.state.get(LAST_EMIT)
        if last is not None and close <= last:
            return None
        size, advance = self.windows.size_ms, self.windows.advance_ms
        lo = 0 if last is None else max(0, last - size + 1)
        hi = close - size
        first = -(-lo // advance) * advance  # the first window start >= lo
        if first > hi:
            return []  # no window can have closed: skip the scan
        return self.closed_windows(lo, hi)
