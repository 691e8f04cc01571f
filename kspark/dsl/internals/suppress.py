"""``KTable.suppress``: hold back a table's updates and release only each key's latest one.

- ``Suppressed.until_window_closes(buffer_config)`` buffers each windowed key until its window
  closes: a key is released once ``window.end <= observed - suppress_duration`` (time windows:
  grace; sessions: gap + grace). Only final results are emitted, so tombstones are dropped.
- ``Suppressed.until_time_limit(time_limit, buffer_config)`` releases a key once
  ``buffered_time <= observed - time_limit``, where ``buffered_time`` is the timestamp of the
  key's first record since it was last released. A buffered delete is released as
  ``Change(None, prior)``.

``observed`` is the largest record timestamp the suppression has seen. A released record is
``Change(latest new value, value before the first buffered change)`` with the timestamp and
headers of the latest buffered record. Keys are released in buffered-time order; ties go by
the key's serialized bytes when the table's key serde is known (as Kafka Streams' buffer, which
orders ``(time, key bytes)``), else by arrival.

A bounded buffer (``max_records`` / ``max_bytes``) that overflows either releases its oldest
keys early (``emit_early_when_full``, the default of a bounded buffer) or stops processing with
:class:`~kspark.errors.BufferFullError` (``shut_down_when_full``). The size of a buffered key is
estimated as ``len(pickle.dumps(key)) + len(pickle.dumps(value))`` of its latest new value.

The buffer lives in a key-value store (logged, not cached) keyed by ``(buffered_time, key bytes
or b"", seqnum)``, so it survives restarts; observed stream time and the next seqnum are in
``processor_state``.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

from sortedcontainers import SortedList

from kspark.dsl.suppressed import Suppressed
from kspark.errors import BufferFullError
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import StreamTimeFollower
from kspark.records import Change, Headers, Record, event_time
from kspark.state.builders import StoreBuilder, Stores
from kspark.windows import Windowed


def suppress_store_builder(store_name: str) -> StoreBuilder:
    """The key-value store holding a suppression's buffer (logged, not cached)."""
    return Stores.key_value_store(store_name, caching=False, logging=True)


class _Buffered(NamedTuple):
    """A buffered key's latest update, stored under ``(buffered_time, key bytes, seqnum)``."""

    key: Any
    new_value: Any
    prior_value: Any
    timestamp: int
    headers: Headers
    size: int


def _size(key: Any, value: Any) -> int:
    return len(pickle.dumps(key)) + len(pickle.dumps(value))


OBSERVED = "observed_stream_time"
SEQNUM = "next_seqnum"


class SuppressProcessor(Processor, StreamTimeFollower):
    """Buffers ``Change`` updates per key and releases them per the :class:`Suppressed`.

    ``suppress_duration_ms``: for ``until_window_closes`` the windows' grace (sessions: gap +
    grace), required; for ``until_time_limit`` ``None`` means the suppression's time limit."""

    def __init__(
        self, suppressed: Suppressed, store_name: str, suppress_duration_ms: int | None = None,
        key_serde: Any = None,
    ) -> None:
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppressed must be a Suppressed, got {suppressed!r}")
        if suppress_duration_ms is None:
            if suppressed.until_window_close:
                raise ValueError(
                    "Suppressed.until_window_closes needs the windows' grace "
                    "(suppress_duration_ms): suppress a windowed KTable"
                )
            suppress_duration_ms = suppressed.time_limit_ms
        self.suppressed = suppressed
        self.store_name = store_name
        self.duration = int(suppress_duration_ms)  # type: ignore[arg-type]
        config = suppressed.buffer_config
        self.max_records = config.records_limit
        self.max_bytes = config.bytes_limit
        self.emit_early = config.emits_early
        self.drop_tombstones = suppressed.until_window_close
        #: orders keys buffered at the same time by their bytes, as Kafka Streams does
        self.key_serde = key_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store: Any = context.get_state_store(self.store_name)
        self.state = context.processor_state
        #: buffer keys ``(buffered_time, seqnum)`` in release order, and key -> buffer key;
        #: read from the store on the first record (after a restart too)
        self._order: SortedList = SortedList()
        #: key -> its buffer slot ``(buffered time, key bytes, sequence number)``
        self._index: dict[Any, tuple[int, bytes, int]] = {}
        self._bytes = 0
        self._loaded = False

    def _load(self) -> None:
        for kv in self.store.all():
            entry = _Buffered(*kv.value)
            self._order.add(kv.key)
            self._index[entry.key] = kv.key
            self._bytes += entry.size
        self._loaded = True

    @property
    def num_records(self) -> int:
        return len(self._index)

    @property
    def buffer_bytes(self) -> int:
        return self._bytes

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped(
                "null-key",
                f"suppress {self.context.processor_name!r}: skipped record with "
                f"null key at timestamp {record.timestamp}",
            )
            return
        if not self._loaded:
            self._load()
        change = record.value if isinstance(record.value, Change) else Change(record.value, None)
        ts = event_time(record)
        observed = max(self.state.get(OBSERVED, -1), ts)
        self.state[OBSERVED] = observed
        size = _size(key, change.new_value)
        slot = self._index.get(key)
        if slot is None:
            if self.drop_tombstones:
                if not isinstance(key, Windowed):
                    raise TypeError(
                        f"suppress {self.context.processor_name!r}: until_window_closes needs "
                        f"windowed keys, got {key!r}"
                    )
                buffered_time = key.window.end
            else:
                buffered_time = ts
            seq = self.state.get(SEQNUM, 0)
            self.state[SEQNUM] = seq + 1
            tie = b"" if self.key_serde is None else self.key_serde.serialize(key)
            slot = (buffered_time, tie, seq)
            prior = change.old_value
            self._order.add(slot)
            self._index[key] = slot
        else:
            previous = _Buffered(*self.store.get(slot))
            prior = previous.prior_value
            self._bytes -= previous.size
        self._bytes += size
        self.store.put(
            slot, tuple(_Buffered(key, change.new_value, prior, ts, record.headers, size)), ts
        )
        self._enforce(observed)

    def advance_stream_time(self, timestamp: int) -> None:
        """Move observed stream time to ``timestamp`` without a record (idle closing),
        releasing what that expires."""
        if not self._loaded:
            self._load()
        observed = max(self.state.get(OBSERVED, -1), timestamp)
        self.state[OBSERVED] = observed
        self._enforce(observed)

    def _enforce(self, observed: int) -> None:
        expiry = observed - self.duration
        while self._order and self._order[0][0] <= expiry:
            self._release_first()
        if self._over_capacity():
            if not self.emit_early:
                meta = self.context.record_metadata()
                origin = (
                    ""
                    if meta is None
                    else f" at topic {meta.topic!r} partition {meta.partition} offset {meta.offset}"
                )
                err = BufferFullError(
                    f"suppress processor {self.context.processor_name!r} (task "
                    f"{self.context.task_id}): buffer exceeded its max capacity{origin}: "
                    f"currently [{self.num_records}/{self._fmt(self.max_records)}] records and "
                    f"[{self._bytes}/{self._fmt(self.max_bytes)}] bytes"
                )
                err.located = True  # already names where
                raise err
            while self._order and self._over_capacity():
                self._release_first()

    @staticmethod
    def _fmt(limit: int | None) -> str:
        return "unbounded" if limit is None else str(limit)

    def _over_capacity(self) -> bool:
        return (self.max_records is not None and self.num_records > self.max_records) or (
            self.max_bytes is not None and self._bytes > self.max_bytes
        )

    def _release_first(self) -> None:
        slot = self._order.pop(0)
        entry = _Buffered(*self.store.get(slot))
        self.store.delete(slot)
        del self._index[entry.key]
        self._bytes -= entry.size
        # only final results drop tombstones; a time limit releases a delete even when the key
        # had no value before it was buffered (Change(None, None)), as Kafka Streams does
        if entry.new_value is None and self.drop_tombstones:
            return
        self.context.forward(
            Record(
                entry.key,
                Change(entry.new_value, entry.prior_value),
                entry.timestamp,
                entry.headers,
            )
        )
