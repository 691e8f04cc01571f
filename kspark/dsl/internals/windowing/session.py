"""Session-window aggregation (docs/semantics.md §2, seeds 000 and 003).

Per record ``(k, v, ts)``: ``close = observed stream time - grace - gap``; the sessions of ``k``
with ``end >= ts - gap`` and ``start <= ts + gap`` are merged (``merger``, starting from
``initializer()``) into ``[min(ts, starts), max(ts, ends)]``. A merged window ending before the
close time is late (dropped, counted). Otherwise each merged session is removed and a tombstone
forwarded for it (unless the merged window is exactly ``[ts, ts]``), the record is aggregated and
the merged session stored and forwarded with timestamp = its end.

``on_window_close`` forwards nothing per record; each session is forwarded once, as
``Change(final, None)`` with timestamp = its end, once ``close > end``. A session merged away by
the record that closes it is never forwarded. (As in Kafka Streams, a record with
``close <= ts <= end + gap`` can still merge a session whose end is below the close time; a
session already forwarded as final is then followed by the merged one.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kspark.dsl.internals.aggregations import Aggregation
from kspark.dsl.internals.processors import FlushHeaders
from kspark.dsl.internals.windowing.common import (
    LAST_EMIT,
    OBSERVED,
    drop_expired,
    drop_null,
    emit_strategy_type,
    materialized_options,
    observe,
    open_window_store,
    resolve_retention,
)
from kspark.dsl.internals.windowing.pending_closes import PendingCloses
from kspark.dsl.internals.windowing.session_batch import SessionBatch
from kspark.dsl.internals.windowing.session_merge import merged_session
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import BatchProcessor, RecordBatch, StreamTimeFollower
from kspark.records import Record, change, event_time
from kspark.state.builders import StoreBuilder, Stores
from kspark.state.session import InMemorySessionStore
from kspark.windows import EmitStrategy, EmitType, SessionWindows, Window, Windowed


def session_store_builder(
    store_name: str, windows: SessionWindows, materialized: Any
) -> StoreBuilder:
    """The session store of a session-windowed aggregation.

    Retention defaults to gap + grace; a smaller ``Materialized`` retention raises
    ``ValueError``. The store is built with at least gap + grace + 1 ms: a session whose end
    equals the close time must still be found to merge (docs/semantics.md §2.5), and the store
    expires sessions with ``end <= observed - retention``."""
    opts = materialized_options(materialized)
    minimum = windows.default_retention_ms
    retention = resolve_retention(
        store_name, opts["retention"], minimum, "the session inactivity gap plus the grace period"
    )
    return Stores.session_store(
        store_name,
        max(retention, minimum + 1),
        key_serde=opts["key_serde"],
        value_serde=opts["value_serde"],
        caching=opts["caching"],
        logging=opts["logging"],
    )


class SessionWindowAggregateProcessor(Processor, BatchProcessor, StreamTimeFollower):
    """Aggregates records into session windows, merging sessions a record bridges."""

    def __init__(
        self,
        store_name: str,
        windows: SessionWindows,
        aggregation: Aggregation,
        emit_strategy: EmitStrategy | None = None,
    ) -> None:
        if not isinstance(windows, SessionWindows):
            raise TypeError(f"windows must be SessionWindows, got {windows!r}")
        initializer, aggregator, merger = aggregation.functions()
        if merger is None:
            raise TypeError("a session window aggregation needs a merger")
        self.store_name = store_name
        self.windows = windows
        self.aggregation = aggregation
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.emit_final = emit_strategy_type(emit_strategy) is EmitType.ON_WINDOW_CLOSE

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        #: cached changes' headers: a cached session's update or removal has the headers of
        #: the record that made it (Kafka Streams' cache context; uncached, it forwards none)
        self.headers = FlushHeaders()
        self.store, self.state, self.caching = open_window_store(
            context, self.store_name, self.emit_final, at_window_end=True, headers=self.headers)
        #: on_window_close: ``(end, start, key)`` of stored sessions not yet forwarded, built
        #: from the store on first use (so also after a restart)
        self.pending_closes: PendingCloses | None = None
        #: set while :meth:`process_batch` runs single records: emission is computed there
        self.in_batch = False

    def process(self, record: Record) -> None:
        key = record.key
        if key is None and drop_null(self.context, record, values=False):
            return
        ts = event_time(record)
        gap = self.windows.inactivity_gap_ms
        observed = observe(self.state, ts)
        close = observed - self.windows.grace_ms - gap
        closed = self._closed_sessions(close) if self.emit_final and not self.in_batch else None

        store = self.store
        found = store.sessions_reaching(key, ts - gap, ts + gap)
        start, end, agg = merged_session(key, ts, found, self.initializer, self.merger)
        removed: Sequence[tuple[int, int]] = ()
        if end < close:
            drop_expired(self.context, record, Window(start, end), close, observed)
        else:
            if start != ts or end != ts:
                removed = [(e, s) for e, s, _ in found]
            if self.emit_final or self.caching:
                try:
                    agg = self.aggregator(key, record.value, agg)
                except Exception:
                    for e, s in removed:  # removed before the aggregator runs, as it would be
                        store.remove(Windowed(key, Window(s, e)), ts)
                    raise
                store.replace_sessions(key, removed, start, end, agg, ts)
                if self.caching and (record.headers or self.headers.pending):
                    for e, s in removed:
                        self.headers.note(Windowed(key, Window(s, e)), record.headers)
                    self.headers.note(Windowed(key, Window(start, end)), record.headers)
            else:  # each change forwarded as it is made
                for e, s, old in found if removed else ():
                    windowed = Windowed(key, Window(s, e))
                    store.remove(windowed, ts)  # logged, as Kafka Streams, at the record's time
                    self.context.forward(Record(windowed, change(None, old), e))
                agg = self.aggregator(key, record.value, agg)
                windowed = Windowed(key, Window(start, end))
                store.put(windowed, agg, ts)
                self.context.forward(Record(windowed, change(agg, None), end))
            pending = self.pending_closes
            if pending is not None:
                for e, s in removed:
                    pending.discard((e, s, key))
                pending.add((end, start, key))

        if closed is not None:
            for windowed, final in closed:
                if not removed or (windowed.window.end, windowed.window.start) not in removed:
                    self.context.forward(Record(windowed, change(final, None),
                                                windowed.window.end, record.headers))
            self.state[LAST_EMIT] = close

    def advance_stream_time(self, timestamp: int) -> None:
        """Move observed stream time to ``timestamp`` without a record (idle closing), forwarding
        the sessions that closes under on_window_close."""
        observed = observe(self.state, timestamp)
        if self.emit_final:
            close = observed - self.windows.grace_ms - self.windows.inactivity_gap_ms
            closed = self._closed_sessions(close)
            if closed is not None:
                for windowed, final in closed:
                    self.context.forward(Record(windowed, change(final, None), windowed.window.end))
                self.state[LAST_EMIT] = close

    def _closed_sessions(self, close: int) -> list[tuple[Windowed, Any]] | None:
        """Sessions with ``last emitted close <= end < close`` (with their aggregates, read
        before this record changes the store), or ``None`` if the close time has not moved."""
        last = self.state.get(LAST_EMIT)
        if last is not None and close <= last:
            return None
        pending = self.pending_closes
        if pending is None:
            floor = -1 if last is None else last
            pending = self.pending_closes = PendingCloses(
                (kv.key.window.end, kv.key.window.start, kv.key.key)
                for kv in self.store.all()
                if kv.key.window.end >= floor
            )
        out = []
        for end, start, key in pending.take_ending_before(close):
            agg = self.store.fetch_session(key, start, end)
            if agg is not None:
                out.append((Windowed(key, Window(start, end)), agg))
        return out

    # -- vectorised batch path -----------------------------------------------------------------
    def process_batch(self, view: RecordBatch) -> int | None:
        """Process a whole batch at once, with exactly the store contents, forwarded records,
        counters and persisted state of :meth:`process` record by record (see
        :class:`SessionBatch`). Returns the number of records handled vectorised, or ``None``
        (nothing done) when the batch must go record by record."""
        store = self.store
        gap, grace = self.windows.inactivity_gap_ms, self.windows.grace_ms
        observed = self.state.get(OBSERVED, -1)
        last_emit = self.state.get(LAST_EMIT)
        if (
            type(store) is not InMemorySessionStore
            or store.read_only
            or (not self.emit_final and not self.caching)  # forwards every update
            # a logged store without a cache logs every write: record by record
            or (store.logging and view.captures_changelog(store.name) and not store.caching)
            or view.stores_of_other_nodes(store.name)
            or store.observed_stream_time != observed
            or store.retention_ms <= gap + grace
            or (last_emit is not None and last_emit > observed - grace - gap)
            # a null value is aggregated like any other: the batch path leaves it out
            or bool((view.values.codes < 0).any())
        ):
            return None
        return SessionBatch(self, view, observed, last_emit).run()
