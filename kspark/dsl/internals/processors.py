"""The processors behind the DSL's stateless operators, KTables and non-windowed aggregations.

KTables carry ``Change(new, old)`` values between these processors (old values are always
sent). Stateful processors write a key-value store and forward through :class:`TableWriter`:
at once with caching off, at commit (from the store's flush listener) with caching on. As in
Kafka Streams, a result carries the headers of the record that wrote it (with caching on, of
the key's last write before the commit), so caching on and off forward the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark.dsl.internals.aggregations import Aggregation
from kspark.dsl.internals.stateless import OneToOne, pair
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import ColumnMapper
from kspark.record_columns import NewValues, RecordColumns
from kspark.records import Change, Headers, Record, change, event_time
from kspark.state.key_value import InMemoryKeyValueStore
from kspark.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    InMemoryVersionedKeyValueStore,
)


def _where(context: ProcessorContext, record: Record) -> str:
    meta = context.record_metadata()
    origin = (f"topic {meta.topic!r} partition {meta.partition} offset {meta.offset}"
              if meta is not None else "no input record")
    return f"processor {context.processor_name!r}, timestamp {record.timestamp}, {origin}"


def drop_null(context: ProcessorContext, record: Record, what: str, detail: str = "") -> None:
    """Count ``record`` in ``dropped-records`` because its ``what`` ("key" or "value") is null."""
    extra = f" {detail}" if detail else ""
    context.record_dropped(
        f"null-{what}", f"skipped record with null {what}{extra} ({_where(context, record)})"
    )


class FlushHeaders:
    """With caching, the headers of each store key's last write since the last flush, once a
    write had any: Kafka Streams' cache keeps each entry's record context and forwards the
    entry with its headers at the flush (``CachingKeyValueStore.putAndMaybeForward``)."""

    def __init__(self) -> None:
        self.pending: dict[Any, Headers] = {}

    def note(self, key: Any, headers: Headers) -> None:
        """``key`` (a store key) was written by a record with ``headers``."""
        if headers or self.pending:
            self.pending[key] = headers

    def take(self) -> dict[Any, Headers]:
        """The headers noted since the last call, by store key."""
        pending, self.pending = self.pending, {}
        return pending


def drop_not_latest(context: ProcessorContext, record: Record, detail: str) -> bool:
    """Count ``record`` in ``dropped-records`` and return true if it is a versioned table's
    update older than the table's latest value (``Change.is_latest`` false), which joins and
    re-groupings skip (Kafka Streams' KIP-914)."""
    if record.value.is_latest:
        return False
    context.record_dropped("not-latest", f"skipped an update of key {record.key!r:.80} older "
                           f"than the table's latest value {detail}")
    return True


def change_forwarder(context: ProcessorContext, *, at_window_end: bool = False,
                     old: Any = None, headers: FlushHeaders | None = None
                     ) -> Callable[[list[Any]], None]:
    """A batched flush listener (``StoreBase.set_flush_listener(..., batched=True)``) that
    forwards each flushed ``(key, new, old, timestamp)`` as ``Record(key, Change(new, old))``
    with that timestamp (``at_window_end``: with the end of the key's window) and the headers
    ``headers`` noted for the key (none else). With an ``old`` flag
    (:class:`~kspark.dsl.internals.table_views.OldValues`) that is off, ``old`` is sent as
    ``None``."""

    def forward(entries: list[tuple[Any, Any, Any, int]]) -> None:
        if headers is not None and headers.pending:
            noted, sent = headers.take(), old is None or old.enabled
            context.forward_all([
                Record(k, change(new, prior if sent else None),
                       k.window.end if at_window_end else ts, noted.get(k, ()))
                for k, new, prior, ts in entries])
            return
        if old is not None and not old.enabled:
            context.forward_all([Record(k, change(new, None), ts) for k, new, _, ts in entries])
            return
        context.forward_all([Record(k, change(new, prior), ts) for k, new, prior, ts in entries])

    def forward_at_end(entries: list[tuple[Any, Any, Any, int]]) -> None:
        if headers is not None and headers.pending:
            forward(entries)
            return
        context.forward_all([Record(k, change(new, prior), k.window.end)
                             for k, new, prior, _ in entries])

    return forward_at_end if at_window_end else forward


class DropNullKeyProcessor(Processor):
    """Before a repartition sink: drops (and counts) records whose key is null, unless
    ``drop`` is off (a join downstream joins records with null keys)."""

    def __init__(self, topic: str, drop: bool = True) -> None:
        self.topic = topic
        self.drop = drop

    def process(self, record: Record) -> None:
        if record.key is None and self.drop:
            drop_null(self.context, record, "key", f"before repartition topic {self.topic!r}")
            return
        self.context.forward(record)


# -- KTable ----------------------------------------------------------------------------------
class TableWriter:
    """Writes a KTable's key-value store and forwards ``change(new, old)``: immediately with
    caching off, from the store's flush listener at commit with caching on. ``old`` is sent as
    ``None`` unless the table's :class:`OldValues` flag is on (docs/semantics.md §4). In a
    versioned store a put older than the history retention forwards nothing, and one older
    than the key's latest value forwards a change that is not the latest (§9.2)."""

    def __init__(self, context: ProcessorContext, store: Any, old: Any) -> None:
        self.context, self.store, self.old = context, store, old
        self.versioned = isinstance(store, InMemoryVersionedKeyValueStore)
        self.headers = FlushHeaders()
        self.caching = store.set_flush_listener(
            change_forwarder(context, old=old, headers=self.headers), batched=True)

    def current(self, key: Any) -> Any:
        """The table's current (latest) value of ``key``."""
        if self.versioned:
            found = self.store.get(key)
            return None if found is None else found.value
        return self.store.get(key)

    def put(self, key: Any, new: Any, old: Any, timestamp: int, headers: Headers = ()) -> None:
        """Store ``new`` (``None`` deletes) and forward it with ``headers`` (those of the record
        that wrote it) unless caching defers it (a change of nothing to nothing too, as Kafka
        Streams forwards it)."""
        code = self.store.put(key, new, timestamp)
        if self.caching:
            self.headers.note(key, headers)
        else:
            sent = old if self.old.enabled else None
            latest = True
            if self.versioned:
                if code == PUT_RETURN_CODE_NOT_PUT:
                    return
                latest = code == PUT_RETURN_CODE_VALID_TO_UNDEFINED
            self.context.forward(Record(key, change(new, sent, latest), timestamp, headers))


class _StoreProcessor(Processor):
    def __init__(self, store_name: str, old: Any) -> None:
        self.store_name = store_name
        self.old = old

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store: InMemoryKeyValueStore = context.get_state_store(self.store_name)
        self.writer = TableWriter(context, self.store, self.old)


class TableSourceProcessor(Processor):
    """Reads a stream of upserts (``None`` value: delete) as a table (``builder.table``,
    ``KStream.to_table``). Null keys are dropped and counted. Materialized (``materialized``
    flag on), it keeps the table in its store and forwards through it; else it forwards each
    record as ``Change(value, None)``."""

    def __init__(self, store_name: str, old: Any, materialized: Any) -> None:
        self.store_name, self.old, self.materialized = store_name, old, materialized

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.writer: TableWriter | None = None
        if self.materialized.enabled:
            self.writer = TableWriter(context, context.get_state_store(self.store_name),
                                      self.old)

    def process(self, record: Record) -> None:
        if record.key is None:
            drop_null(self.context, record, "key", f"for table store {self.store_name!r}")
            return
        writer = self.writer
        if writer is None:
            self.context.forward(record.with_value(change(record.value, None)))
            return
        writer.put(record.key, record.value, writer.current(record.key), event_time(record),
                   record.headers)


class FilterValue:
    """A filter's value: the value if ``predicate(key, value)`` holds (fails, with ``negate``),
    else ``None``."""

    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool) -> None:
        self.predicate, self.negate = predicate, negate

    def __call__(self, key: Any, value: Any) -> Any:
        if value is None or bool(self.predicate(key, value)) == self.negate:
            return None
        return value

    def __reduce__(self) -> tuple[Any, ...]:  # compiled, it pickles only so
        return FilterValue, (self.predicate, self.negate)


class MapValue:
    """``map_values``' value: ``mapper(value)``; an absent value stays absent."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def __call__(self, key: Any, value: Any) -> Any:
        return None if value is None else self.mapper(value)

    def __reduce__(self) -> tuple[Any, ...]:  # compiled, it pickles only so
        return MapValue, (self.mapper,)


class MaterializingProcessor(Processor):
    """A table operator that may keep its results in a store (``store_name``; ``None``: it
    keeps none): ``writer``, a :class:`TableWriter` over it, sending old values as ``old``
    says."""

    def __init__(self, old: Any, store_name: str | None) -> None:
        self.old = old
        self.store_name = store_name
        self.writer: TableWriter | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        if self.store_name is not None:
            self.writer = TableWriter(context, context.get_state_store(self.store_name),
                                      self.old)


class TableValueProcessor(MaterializingProcessor):
    """``KTable.filter`` (``compute`` a :class:`FilterValue`) and ``map_values``
    (:class:`MapValue`): computes each change's new value, and its old one when old values are
    sent; optionally materialized in a store. A filter does not forward a change from nothing
    to nothing when it sends old values; without them it cannot tell, and forwards a delete
    (as Kafka Streams' filter does)."""

    def __init__(self, compute: Callable[[Any, Any], Any], old: Any,
                 store_name: str | None = None) -> None:
        super().__init__(old, store_name)
        self.compute = compute
        self.skip_empty = isinstance(compute, FilterValue)

    def process(self, record: Record) -> None:
        update: Change = record.value
        key = record.key
        new = self.compute(key, update.new_value)
        writer = self.writer
        old = None
        if self.old.enabled:
            old = (writer.current(key) if writer is not None
                   else self.compute(key, update.old_value))
            if old is None and new is None and self.skip_empty:
                return
        if writer is not None:
            writer.put(key, new, old, event_time(record), record.headers)
            return
        self.context.forward(record.with_value(change(new, old, update.is_latest)))


class TableToStreamProcessor(OneToOne, ColumnMapper):
    """Forwards each change's new value (``None`` for a delete)."""

    def map_one(self, record: Record) -> Record:
        return Record(record.key, record.value.new_value, record.timestamp, record.headers)

    def map_columns(self, columns: RecordColumns) -> RecordColumns:
        values = columns.values
        if isinstance(values, NewValues):
            return columns.with_values(values.new_values)
        return columns.with_values([change.new_value for change in values])


class TableRepartitionMapProcessor(Processor):
    """``KTable.group_by``: maps the old and new value of each change to ``(group key, value)``.

    Same group key: one ``Change(new, old)``; different ones: ``Change(None, old)`` to the old
    group key, then ``Change(new, None)`` to the new one (docs/semantics.md §4). A new pair with a
    null key or value is dropped and counted (its old pair is still subtracted)."""

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def _select(self, record: Record, value: Any, count: bool) -> tuple[Any, Any] | None:
        if value is None:
            return None
        key, selected = pair(self.selector(record.key, value), "KTable.group_by's selector")
        if key is None or selected is None:
            if count:
                what = "key" if key is None else "value"
                detail = f"selected by group_by for key {record.key!r:.80}"
                drop_null(self.context, record, what, detail)
            return None
        return key, selected

    def process(self, record: Record) -> None:
        update: Change = record.value
        if drop_not_latest(self.context, record, f"({_where(self.context, record)})"):
            return
        old = self._select(record, update.old_value, count=False)
        new = self._select(record, update.new_value, count=True)
        ts, headers = record.timestamp, record.headers
        if old is not None and new is not None and old[0] == new[0]:
            self.context.forward(Record(new[0], change(new[1], old[1]), ts, headers))
            return
        if old is not None:
            self.context.forward(Record(old[0], change(None, old[1]), ts, headers))
        if new is not None:
            self.context.forward(Record(new[0], change(new[1], None), ts, headers))


# -- aggregations ----------------------------------------------------------------------------
class StreamAggregateProcessor(_StoreProcessor):
    """KGroupedStream ``aggregate``, ``count`` and ``reduce`` (an :class:`Aggregation`).

    Null keys and values are dropped and counted; the result's timestamp is
    ``max(record.ts, previous aggregate's ts)`` (docs/semantics.md §4)."""

    def __init__(self, store_name: str, aggregation: Aggregation, old: Any) -> None:
        super().__init__(store_name, old)
        self.aggregation = aggregation
        self.initializer, self.aggregator, _ = aggregation.functions()

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            what = "key" if key is None else "value"
            drop_null(self.context, record, what, f"in aggregation {self.store_name!r}")
            return
        old = self.store.get_with_timestamp(key)
        if old is None:
            new = self.aggregator(key, value, self.initializer())
            ts = event_time(record)
            old_value = None
        else:
            old_value = old.value
            new = self.aggregator(key, value, old_value)
            ts = max(event_time(record), old.timestamp)
        self.writer.put(key, new, old_value, ts, record.headers)


class TableAggregateProcessor(_StoreProcessor):
    """KGroupedTable ``aggregate`` / ``count`` / ``reduce`` (docs/semantics.md §4):

    1. ``old_agg = store.get(key)``;
    2. the change has an old value and ``old_agg`` exists: ``inter = subtractor(key, old,
       old_agg)``, timestamp ``max(record.ts, old_agg.ts)``; else ``inter = old_agg``;
    3. the change has a new value: ``new_agg = adder(key, new, inter if inter is not None else
       initializer())`` (timestamp as in 2 when an aggregate was stored); else ``new_agg =
       inter``;
    4. store ``new_agg`` (``None`` deletes) and forward ``Change(new_agg, old_agg)``."""

    def __init__(self, store_name: str, initializer: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any],
                 subtractor: Callable[[Any, Any, Any], Any], old: Any) -> None:
        super().__init__(store_name, old)
        self.initializer, self.adder, self.subtractor = initializer, adder, subtractor

    def process(self, record: Record) -> None:
        key, update = record.key, record.value
        if key is None:
            drop_null(self.context, record, "key", f"in aggregation {self.store_name!r}")
            return
        old = self.store.get_with_timestamp(key)
        old_agg = None if old is None else old.value
        ts = event_time(record)
        if old is not None and update.old_value is not None and old_agg is not None:
            inter = self.subtractor(key, update.old_value, old_agg)
            ts = max(ts, old.timestamp)
        else:
            inter = old_agg
        if update.new_value is not None:
            new_agg = self.adder(key, update.new_value,
                                 inter if inter is not None else self.initializer())
            if old is not None:
                ts = max(ts, old.timestamp)
        else:
            new_agg = inter
        self.writer.put(key, new_agg, old_agg, ts, record.headers)
