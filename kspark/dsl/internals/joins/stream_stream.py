"""The processors of a stream-stream windowed join (docs/semantics.md §9.1), as Kafka Streams
runs them.

Each side has a *windowed* processor that forwards its record and then keeps it (unless its key
is null) in its side's window store (duplicates retained, keyed by the record's timestamp), and
a *join* processor that joins the record with the other side's store: every other-side record
of the key with a timestamp in ``[ts - before, ts + after]`` (seen from the right side:
``[ts - after, ts + before]``) gives ``joiner(left, right)`` at the larger of the two
timestamps. Left and outer joins keep a record that found no partner in the shared outer-join
store (:mod:`kspark.state.join_stores`) and forward ``joiner(value, None)`` only once the record
can no longer be joined: when stream time has passed its timestamp by ``after`` (right side:
``before``) plus the grace period. Both join processors of one join share the join's stream time
and the smallest timestamp in the outer-join store (:meth:`ProcessorContext.shared_state`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kspark.dsl.internals.processors import drop_null
from kspark.errors import SerializationError
from kspark.processor.api import Processor, ProcessorContext
from kspark.records import Record, event_time
from kspark.serdes import Serde
from kspark.state.join_stores import ListValueStore, TimestampedKeyAndJoinSideSerde, side_item
from kspark.state.window import InMemoryWindowStore
from kspark.windows import JoinWindows

#: shared state keys: the join's stream time, and the smallest timestamp put into the outer-join
#: store since its last scan (``None``: none, Kafka Streams' ``Long.MAX_VALUE``)
STREAM_TIME: Final = "stream_time"
MIN_TIME: Final = "min_time"
#: shared state key: ``[value, bytes]``, a value the join processor has just serialized for the
#: outer-join store, handed to the windowed processor that forwarded it (no code runs between
#: the two writes, so the bytes are the value's); ``[None, None]`` otherwise
SERIALIZED: Final = "serialized"


def _handoff(context: ProcessorContext, shared: str) -> list[Any]:
    """The join's :data:`SERIALIZED` slot (one per join and task)."""
    slot: list[Any] = context.shared_state(shared).setdefault(SERIALIZED, [None, None])
    return slot


class JoinWindowProcessor(Processor):
    """Forwards each record, then puts it (unless its key is null) into its side's window
    store at its timestamp, serialized by ``value_serde`` (as Kafka Streams keeps it: the
    other side's joins read a copy of the value as it was put). ``shared``: the join's shared
    state, where its join processor hands over the bytes of a value it has just written to the
    outer-join store with the same serde (:data:`SERIALIZED`)."""

    def __init__(self, store_name: str, value_serde: Serde, shared: str | None = None) -> None:
        self.store_name = store_name
        self.value_serde = value_serde
        self.shared = shared

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store: InMemoryWindowStore = context.get_state_store(self.store_name)
        self.serialize = self.value_serde.serializer()
        self.handed: list[Any] = (
            [None, None] if self.shared is None else _handoff(context, self.shared))

    def process(self, record: Record) -> None:
        self.context.forward(record)
        value = record.value
        handed = self.handed  # taken at once: no later record finds this one's bytes
        data = handed[1] if handed[0] is value and value is not None else None
        handed[0] = handed[1] = None
        if record.key is not None:
            ts = event_time(record)
            if data is None:
                try:
                    data = self.serialize(value)
                except SerializationError as exc:
                    raise SerializationError(f"store {self.store_name!r}: {exc}") from exc
            self.store.put(record.key, data, ts, ts)


class StreamJoinProcessor(Processor):
    """One side of a stream-stream join (see the module).

    ``left``: whether this is the left side (the stream ``join`` was called on); ``outer``:
    whether this side's unmatched records are emitted (the left side of a left join, both sides
    of an outer join); ``other_outer``: whether the other side's are; ``outer_store``: the
    shared outer-join store of a left or outer join (``None`` for an inner join), with
    ``outer_keys`` making its keys."""

    def __init__(
        self,
        *,
        left: bool,
        outer: bool,
        other_outer: bool = True,
        windows: JoinWindows,
        joiner: Callable[[Any, Any], Any],
        other_store: str,
        this_values: Serde,
        other_values: Serde,
        outer_store: str | None,
        outer_keys: TimestampedKeyAndJoinSideSerde | None,
        shared: str,
    ) -> None:
        self.left, self.outer = left, outer
        # a partner found in the other side's store may wait in the outer-join store only when
        # the other side keeps its unmatched records there (a left join's right side does not)
        self.clear_partners = outer_store is not None and other_outer
        self.windows = windows
        self.joiner = joiner
        # how far this side looks back and ahead into the other side's store
        self.before_ms = windows.before_ms if left else windows.after_ms
        self.after_ms = windows.after_ms if left else windows.before_ms
        self.other_store_name = other_store
        self.this_values, self.other_values = this_values, other_values
        self.outer_store_name = outer_store
        self.outer_keys = outer_keys
        self.shared = shared

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.other_store: InMemoryWindowStore = context.get_state_store(self.other_store_name)
        self.serialize_this = self.this_values.serializer()
        self.deserialize_other = self.other_values.deserializer()
        left, right = ((self.this_values, self.other_values) if self.left
                       else (self.other_values, self.this_values))
        self.deserialize_left, self.deserialize_right = left.deserializer(), right.deserializer()
        self.outer_store: ListValueStore | None = (
            None if self.outer_store_name is None
            else context.get_state_store(self.outer_store_name))
        self.tracker = context.shared_state(self.shared)
        self.tracker.setdefault(STREAM_TIME, -1)
        self.tracker.setdefault(MIN_TIME, None)
        keys = self.outer_keys
        self.key_bytes = None if keys is None else keys.key_serde.serializer()
        self.record_key = None if keys is None else keys.key_serde.deserializer()
        self.handed = _handoff(context, self.shared)

    def join(self, this: Any, other: Any) -> Any:
        """``joiner(left value, right value)`` of this side's and the other side's value."""
        return self.joiner(this, other) if self.left else self.joiner(other, this)

    def process(self, record: Record) -> None:
        ts = event_time(record)
        tracker = self.tracker
        stream_time: int = tracker[STREAM_TIME]
        if ts > stream_time:
            tracker[STREAM_TIME] = stream_time = ts
        key, value = record.key, record.value
        if key is None or value is None:
            if self.outer and key is None and value is not None:
                self.context.forward(record.with_value(self.join(value, None)))
            else:
                drop_null(self.context, record, "key" if key is None else "value",
                          f"in stream-stream join {self.context.processor_name!r}")
            return
        outer_store = self.outer_store
        if outer_store is not None and ts == stream_time:
            self._emit_closed(record, outer_store, stream_time)
        time_to = max(0, ts + self.after_ms)
        others = self.other_store.fetch_values(key, max(0, ts - self.before_ms), time_to)
        context = self.context  # its forward called directly (no bound method made)
        headers = record.headers
        deserialize = self.deserialize_other
        if others and self.clear_partners:
            assert outer_store is not None and self.key_bytes is not None
            other_side = not self.left
            key_bytes = self.key_bytes(key) or b""
            for other_ts, _ in others:
                outer_store.put_if_absent((other_ts, other_side, key_bytes), None, ts)
        for other_ts, other_data in others:
            context.forward(Record(key, self.join(value, deserialize(other_data)),
                                   max(ts, other_ts), headers))
        if others or not self.outer:
            return
        if outer_store is None or time_to < stream_time:
            context.forward(record.with_value(self.join(value, None)))
            return
        assert self.key_bytes is not None
        min_time = tracker[MIN_TIME]
        if min_time is None or ts < min_time:
            tracker[MIN_TIME] = ts
        data = self.serialize_this(value)
        outer_store.put((ts, self.left, self.key_bytes(key) or b""), side_item(self.left, data),
                        ts)
        handed = self.handed
        handed[0], handed[1] = value, data

    def _emit_closed(self, record: Record, store: ListValueStore, stream_time: int) -> None:
        """Forward (and remove) the unmatched records of the outer-join store whose window has
        closed, oldest first, as Kafka Streams does: it reads the store in key order (timestamp,
        side, key) until both sides have a record whose window is still open, and remembers
        the timestamp of the last record it looked at."""
        tracker = self.tracker
        min_time = tracker[MIN_TIME]
        grace: int = self.windows.grace_ms
        if min_time is None:
            # Kafka Streams keeps Long.MAX_VALUE here, and MAX_VALUE + after + grace overflows
            # (so it looks) unless after + grace <= 0; this is the case after a restore, when
            # the restored store may hold records
            if self.after_ms + grace <= 0:
                return
        else:
            oldest: int = min_time  # one unboxing, then native arithmetic
            if oldest + self.after_ms + grace >= stream_time:
                return  # nothing can have closed yet
        # the timestamp of the last record looked at, None while there was none
        last: int | None = None
        after: int = self.windows.after_ms
        before: int = self.windows.before_ms
        left_open = right_open = False
        emitted = []
        context = self.context
        headers = record.headers
        joiner = self.joiner
        record_key = self.record_key
        assert record_key is not None
        timestamp: int
        is_left: bool
        item: bytes
        try:
            for store_key, items in store.entries():
                timestamp, is_left, key_bytes = store_key
                last = timestamp
                if left_open and right_open:
                    break
                if timestamp + (after if is_left else before) + grace >= stream_time:
                    if is_left:
                        left_open = True
                    else:
                        right_open = True
                    continue
                key = record_key(key_bytes)
                for item in items:
                    if item[0] == 1:
                        out = joiner(self.deserialize_left(item[1:]), None)
                    else:
                        out = joiner(None, self.deserialize_right(item[1:]))
                    context.forward(Record(key, out, timestamp, headers))
                emitted.append(store_key)
        finally:
            tracker[MIN_TIME] = last
        if emitted:
            store.remove_all(emitted)
