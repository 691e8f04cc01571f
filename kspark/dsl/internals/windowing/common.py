"""What the windowed aggregations share: store options from a ``Materialized``, drop accounting,
the stream time each processor observes (persisted with the task), and the base of the time and
sliding window aggregations (store access, forwarding, emission on window close)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Generic, TypeVar

from kspark._duration import to_ms
from kspark.dsl.internals.aggregations import Aggregation
from kspark.dsl.internals.processors import FlushHeaders, change_forwarder
from kspark.dsl.materialized import Materialized
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import StreamTimeFollower
from kspark.records import Headers, Record, change
from kspark.state.builders import StoreBuilder, Stores
from kspark.windows import EmitStrategy, EmitType, SlidingWindows, TimeWindows, Window, Windowed

#: ``processor_state`` keys (persisted with the task across restarts).
OBSERVED: Final = "observed_stream_time"
LAST_EMIT: Final = "last_emit_close_time"


def materialized_options(materialized: Materialized | str | None) -> dict[str, Any]:
    """Read a ``Materialized`` (or ``None``, or a store name): retention (ms or ``None``),
    caching (default on), logging (default on) and serdes."""
    if materialized is None or isinstance(materialized, str):
        return {
            "retention": None,
            "caching": True,
            "logging": True,
            "key_serde": None,
            "value_serde": None,
        }
    retention = materialized.retention
    if isinstance(retention, timedelta | int) and not isinstance(retention, bool):
        retention = to_ms(retention, "retention")
    elif retention is not None:
        raise TypeError(f"retention must be int ms or timedelta, got {retention!r}")
    return {
        "retention": retention,
        "caching": bool(materialized.caching),
        "logging": bool(materialized.logging),
        "key_serde": materialized.key_serde,
        "value_serde": materialized.value_serde,
    }


def window_store_builder(
    store_name: str, opts: dict[str, Any], retention_ms: int, size_ms: int
) -> StoreBuilder:
    """The window store of a windowed aggregation (no duplicates), with the ``Materialized``
    options ``opts`` (:func:`materialized_options`)."""
    return Stores.window_store(
        store_name,
        retention_ms,
        size_ms,
        retain_duplicates=False,
        key_serde=opts["key_serde"],
        value_serde=opts["value_serde"],
        caching=opts["caching"],
        logging=opts["logging"],
    )


def open_window_store(context: ProcessorContext, store_name: str, emit_final: bool,
                      at_window_end: bool = False, headers: FlushHeaders | None = None
                      ) -> tuple[Any, dict[str, Any], bool]:
    """A windowed aggregation's store, its persisted processor state, and whether the store's
    cache forwards the updates (on_window_close forwards only final results: the cache's
    output is ignored). With ``at_window_end`` the cache forwards each update with its
    window's end as timestamp (sessions, as Kafka Streams), else with the entry's; with the
    ``headers`` noted for its key."""
    store: Any = context.get_state_store(store_name)
    listener = change_forwarder(context, at_window_end=at_window_end, headers=headers)
    caching = False if emit_final else store.set_flush_listener(listener, batched=True)
    return store, context.processor_state, caching


def resolve_retention(store_name: str, requested: int | None, minimum: int, what: str) -> int:
    """``requested`` (or ``minimum`` when ``None``); below ``minimum`` raises ``ValueError``."""
    if requested is None:
        return minimum
    if requested < minimum:
        raise ValueError(
            f"The retention period of the store {store_name!r} must be no smaller than {what} "
            f"({minimum} ms), got {requested} ms"
        )
    return requested


def where(context: ProcessorContext) -> str:
    """Where the current record came from, for log messages."""
    meta = context.record_metadata()
    origin = (
        f"topic {meta.topic!r} partition {meta.partition} offset {meta.offset}"
        if meta is not None
        else "no input record"
    )
    return f"processor {context.processor_name!r}, {origin}"


def drop_null(context: ProcessorContext, record: Record, *, values: bool = True) -> bool:
    """Count and skip a record with a null key (or, with ``values``, a null value); return
    whether it was dropped. Kafka Streams' session and time-window aggregations skip null keys
    only (the aggregator gets a null value); its sliding windows skip both."""
    if record.key is None:
        what = "key"
    elif values and record.value is None:
        what = "value"
    else:
        return False
    context.record_dropped(
        f"null-{what}",
        f"skipped record with null {what} at timestamp {record.timestamp} ({where(context)})",
    )
    return True


def drop_expired(
    context: ProcessorContext,
    record: Record,
    window: Window,
    close: int,
    observed: int,
    end_inclusive: bool = True,
) -> None:
    """Count ``record`` as dropped for the closed ``window``."""
    bracket = "]" if end_inclusive else ")"
    context.record_dropped(
        "expired-window",
        f"skipped record for expired window: key {record.key!r} timestamp {record.timestamp} "
        f"window [{window.start}, {window.end}{bracket} close time {close} observed stream "
        f"time {observed} ({where(context)})",
    )


def observe(state: dict[str, Any], timestamp: int) -> int:
    """Advance the processor's persisted observed stream time; return it."""
    observed = max(state.get(OBSERVED, -1), timestamp)
    state[OBSERVED] = observed
    return observed


def emit_strategy_type(emit_strategy: EmitStrategy | None) -> EmitType:
    if emit_strategy is None:
        return EmitType.ON_WINDOW_UPDATE
    if not isinstance(emit_strategy, EmitStrategy):
        raise TypeError(f"emit_strategy must be an EmitStrategy, got {emit_strategy!r}")
    return emit_strategy.type


#: the windows specification of a windowed aggregation
W = TypeVar("W", TimeWindows, SlidingWindows)


class WindowedAggregateBase(Processor, StreamTimeFollower, Generic[W]):
    """Store access and forwarding shared by the time and sliding window aggregations."""

    #: the windows class the aggregation takes
    windows_type: type = object
    windows: W

    def __init__(
        self,
        store_name: str,
        windows: W,
        aggregation: Aggregation,
        emit_strategy: EmitStrategy | None = None,
    ) -> None:
        if not isinstance(windows, self.windows_type):
            raise TypeError(
                f"windows must be {self.windows_type.__name__}, got {windows!r}"
            )
        self.store_name = store_name
        self.windows = windows
        self.aggregation = aggregation
        self.initializer, self.aggregator, _ = aggregation.functions()
        self.emit_final = emit_strategy_type(emit_strategy) is EmitType.ON_WINDOW_CLOSE

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.headers = FlushHeaders()
        self.store, self.state, self.caching = open_window_store(
            context, self.store_name, self.emit_final, headers=self.headers)

    def forward_update(self, windowed: Windowed, new: Any, old: Any, timestamp: int,
                       headers: Headers = ()) -> None:
        """Forward an update with ``headers`` (the record's) now, unless caching (flush
        listener, with the headers of the window's last record) or on_window_close owns it."""
        if self.emit_final:
            return
        if self.caching:
            self.headers.note(windowed, headers)
        else:
            self.context.forward(Record(windowed, change(new, old), timestamp, headers))

    def closed_windows(self, lo: int, hi: int) -> list[tuple[Windowed, Any, int]]:
        """``(windowed, agg, timestamp)`` of every stored window with ``lo <= start <= hi``,
        by start then key."""
        if hi < lo:
            return []
        return [
            (kv.key, kv.value.value, kv.value.timestamp)
            for kv in self.store.fetch_all_with_timestamps(lo, hi)
        ]

    def advance_stream_time(self, timestamp: int) -> None:
        """Move observed stream time to ``timestamp`` without a record (idle closing), forwarding
        the windows that closes under on_window_close."""
        observed = observe(self.state, timestamp)
        if self.emit_final:
            close = observed - self.windows.grace_ms
            pending = self._pending_final(close)
            if pending is not None:
                self.emit_final_results(pending, close)

    def _pending_final(self, close: int) -> list[tuple[Windowed, Any, int]] | None:
        raise NotImplementedError

    def emit_final_results(self, pending: list[tuple[Windowed, Any, int]], close: int,
                           headers: Headers = ()) -> None:
        """Forward the closed windows' final results, with the headers of the record that
        closed them (Kafka Streams' ``maybeForwardFinalResult``)."""
        for windowed, agg, timestamp in pending:
            self.context.forward(Record(windowed, change(agg, None), timestamp, headers))
        self.state[LAST_EMIT] = close
