"""The in-memory window store: values keyed by ``(key, window start)``, segmented by window
start (docs/semantics.md §6)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state.internals.base import DEFAULT_BUCKETS
from kspark.state.internals.common import merge_sorted
from kspark.state.internals.segments import EXPIRED, SegmentedStore
from kspark.windows import Window, Windowed

_INF = math.inf
#: sequence numbers of a store with duplicates wrap at Java's Integer.MAX_VALUE, as Kafka Streams'
_MAX_INT = (1 << 31) - 1


def _by_start_key(item: tuple[Any, Any, Any]) -> Any:
    key, (start, seq), _ = item
    return (start, key, seq)


def _by_key_start(item: tuple[Any, Any, Any]) -> Any:
    return (item[0], item[1])


class InMemoryWindowStore(SegmentedStore):
    """Values of fixed-size windows by key and window start, kept for ``retention_ms``.

    The store key (changelog, flush listener) is ``Windowed(key, Window(start, start + size))``,
    or ``(Windowed, seqnum)`` when duplicates are retained. Entries of one key and start are
    ordered by sub key ``(start, seqnum)`` (seqnum is 0 without duplicates, else 1, 2, ... as
    Kafka Streams numbers them).
    """

    kind = "window"
    segment_time_name = "window start"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool = False,
        segment_interval_ms: int | None = None,
        caching: bool = False,
        logging: bool = True,
        num_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        if window_size_ms < 0:
            raise ValueError(f"store {name!r}: window size must be >= 0 ms, got {window_size_ms}")
        if retention_ms < window_size_ms:
            raise ValueError(
                f"store {name!r}: retention ({retention_ms} ms) must be >= the window size "
                f"({window_size_ms} ms)"
            )
        if caching and retain_duplicates:
            raise ValueError(f"store {name!r}: caching cannot be enabled with retain_duplicates")
        super().__init__(
            name,
            retention_ms,
            segment_interval_ms,
            caching=caching,
            logging=logging,
            num_buckets=num_buckets,
        )
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self._seqnum = 0

    # -- keys --------------------------------------------------------------------------------
    def _windowed(self, key: Any, start: int) -> Windowed:
        return Windowed(key, Window(start, start + self.window_size_ms))

    def _store_key(self, key: Any, start: int, seq: int) -> Any:
        windowed = self._windowed(key, start)
        return (windowed, seq) if self.retain_duplicates else windowed

    def _decode(self, store_key: Any) -> tuple[Any, int, int]:
        if self.retain_duplicates:
            windowed, seq = store_key
        else:
            windowed, seq = store_key, 0
        return windowed.key, windowed.window.start, seq

    def _live(self, start: int) -> bool:
        return start > self.expiry_bound

    def _check_key(self, key: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: key must not be None")

    def _seg(self, ts: int | None) -> int | None:
        return None if ts is None else self.segment_id(ts)

    # -- meta --------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        out = super().meta()
        if self.retain_duplicates:
            out["seqnum"] = self._seqnum
        return out

    def restore_meta(self, meta: dict[str, Any]) -> None:
        super().restore_meta(meta)
        self._seqnum = max(self._seqnum, int(meta.get("seqnum", 0)))

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: Any, value: Any, window_start: int, timestamp: int | None = None) -> None:
        """Store ``value`` for ``key``'s window starting at ``window_start`` (``None`` deletes;
        with duplicates retained every value is added and ``None`` stores nothing). ``timestamp``
        defaults to the record's timestamp (the window start if there is no record). Every put
        is logged, an expired one too (as Kafka Streams logs it), but only live ones are cached
        and forwarded."""
        self._check_writable(key)
        if timestamp is None:
            timestamp = self._timestamp(None)
            if timestamp == -1:
                timestamp = window_start
        if self.retain_duplicates:
            # as Kafka Streams' changelogging store: every put takes the next sequence number
            # (from 1); a None stores nothing but is logged, under its own number
            self._seqnum = seq = (self._seqnum + 1) & _MAX_INT
            if value is None:
                self._changed(self._store_key(key, window_start, seq), None, None, timestamp)
                return
            if not self.caching and not self.logs_changes:  # no change to record
                old = self._write(key, window_start, (window_start, seq), value, timestamp)
                if old is EXPIRED:
                    self.context.record_dropped("expired-segment",
                                                self._drop_detail(key, window_start))
                return
        else:
            seq = 0
        old = self._write(key, window_start, (window_start, seq), value, timestamp)
        if old is EXPIRED or (value is not None and not self._live(window_start)):
            # expired: dropped (counted), or stored in a live segment but invisible
            if old is EXPIRED and value is not None:
                self.context.record_dropped("expired-segment", self._drop_detail(key, window_start))
            self._log_expired(self._store_key(key, window_start, seq), value, timestamp)
            return
        # A remove is logged even when nothing was stored: its window start moves observed
        # stream time, and the changelog must carry that to rebuild the store exactly.
        self._changed(self._store_key(key, window_start, seq), old, value, timestamp)

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        keys, starts, seqs, values, stamps = [], [], [], [], []
        for store_key, value, timestamp in changelog:
            key, start, seq = self._decode(store_key)
            if self.retain_duplicates:
                self._seqnum = max(self._seqnum, seq)
                if value is None:
                    # a None put stored nothing (see put), but its restore moves observed
                    # stream time, as Kafka Streams' segmented stores restore every record
                    self.advance_observed(start)
                    continue
            keys.append(key)
            starts.append(start)
            seqs.append(seq)
            values.append(value)
            stamps.append(timestamp)
        window_starts = np.array(starts, dtype=np.int64)
        self._restore_columns(keys, window_starts, window_starts, seqs, values, stamps)

    def restore_columns(
        self, keys: Sequence[Any], starts: np.ndarray, values: Sequence[Any],
        timestamps: Sequence[int],
    ) -> None:
        """:meth:`restore` of changelog entries given as columns, in bulk: ``keys[i]``'s window
        starting at ``starts[i]`` holds ``values[i]`` (``None``: removed), written at
        ``timestamps[i]``. Only for a store without duplicates (every sequence number 0)."""
        if self.retain_duplicates:
            raise ValueError(f"store {self.name!r} retains duplicates: restore it with restore()")
        self._restore_columns(keys, starts, starts, np.zeros(len(starts), dtype=np.int64),
                              values, timestamps)

    # -- reads -------------------------------------------------------------------------------
    def _current(self, store_key: Any) -> Any:
        key, start, seq = self._decode(store_key)
        if not self._live(start):
            return None
        entry = self._get_entry(key, self.segment_id(start), (start, seq))
        return None if entry is None else entry[0]

    def _fetch_entry(self, key: Any, window_start: int) -> tuple[Any, int] | None:
        self._check_key(key)
        if not self._live(window_start):
            return None
        seg = self.segment_id(window_start)
        for _, entry in self._key_entries(key, seg, seg, (window_start,), (window_start, _INF)):
            return entry
        return None

    def fetch(self, key: Any, window_start: int) -> Any:
        """The value of ``key``'s window starting at ``window_start`` (with duplicates: the
        earliest stored), or ``None``."""
        entry = self._fetch_entry(key, window_start)
        return None if entry is None else entry[0]

    def fetch_with_timestamp(self, key: Any, window_start: int) -> ValueAndTimestamp | None:
        """As :meth:`fetch`, with the timestamp of the write that stored the value."""
        entry = self._fetch_entry(key, window_start)
        return None if entry is None else ValueAndTimestamp(entry[0], entry[1])

    def _fetch_key(
        self, key: Any, time_from: int | None, time_to: int | None
    ) -> list[tuple[int, tuple[Any, int]]]:
        self._check_key(key)
        bound = self.expiry_bound
        lo = None if time_from is None else (time_from,)
        hi = None if time_to is None else (time_to, _INF)
        return [
            (sub[0], entry)
            for sub, entry in self._key_entries(
                key, self._seg(time_from), self._seg(time_to), lo, hi
            )
            if sub[0] > bound
        ]

    def fetch_range(self, key: Any, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        """``KeyValue(window_start, value)`` of ``key``'s windows with ``time_from <= start <=
        time_to`` (``None``: unbounded), ascending by start."""
        return [KeyValue(s, e[0]) for s, e in self._fetch_key(key, time_from, time_to)]

    def fetch_values(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """As :meth:`fetch_range` with both bounds, as plain ``(window start, value)`` pairs:
        the read of a stream-stream join, once per record."""
        self._check_key(key)
        data: dict[int, Any] | None = self._bucket_for(key, create=False)
        if not data:
            return []
        bound = self.expiry_bound
        if time_from <= bound:
            time_from = bound + 1
        out: list[tuple[int, Any]] = []
        for seg in self._segments(data, self.segment_id(time_from), self.segment_id(time_to)):
            subs: dict[Any, Any] | None = data[seg].get(key)
            if not subs:
                continue
            if len(subs) == 1:
                for sub, entry in subs.items():
                    start: int = sub[0]
                    if time_from <= start <= time_to:
                        out.append((start, entry[0]))
                continue
            # a key's entries are held in the order they were put: ascending but for late ones
            ordered = True
            last: tuple[int, int] = (-1, -1)
            for sub in subs:
                pair: tuple[int, int] = sub
                if pair[0] < last[0] or (pair[0] == last[0] and pair[1] < last[1]):
                    ordered = False
                    break
                last = pair
            for sub in (subs if ordered else sorted(subs)):
                start = sub[0]
                if time_from <= start <= time_to:
                    out.append((start, subs[sub][0]))
        return out

    def backward_fetch_range(
        self, key: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        """As :meth:`fetch_range`, descending by start."""
        return [KeyValue(s, e[0]) for s, e in reversed(self._fetch_key(key, time_from, time_to))]

    def fetch_range_with_timestamps(
        self, key: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        """As :meth:`fetch_range`, yielding ``KeyValue(window_start, ValueAndTimestamp)``."""
        return [
            KeyValue(s, ValueAndTimestamp(e[0], e[1]))
            for s, e in self._fetch_key(key, time_from, time_to)
        ]

    def _query(
        self,
        key_from: Any,
        key_to: Any,
        time_from: int | None,
        time_to: int | None,
        order: Callable[[tuple[Any, Any, Any]], Any],
        reverse: bool,
        with_timestamps: bool = False,
    ) -> list[KeyValue]:
        bound = self.expiry_bound
        lo = None if time_from is None else (time_from,)
        hi = None if time_to is None else (time_to, _INF)
        runs = self._range_runs(key_from, key_to, self._seg(time_from), self._seg(time_to), lo, hi)
        runs = [[item for item in run if item[1][0] > bound] for run in runs]
        size = self.window_size_ms

        def to_kv(item: tuple[Any, Any, Any]) -> KeyValue:
            key, (start, _), entry = item
            value = ValueAndTimestamp(entry[0], entry[1]) if with_timestamps else entry[0]
            return KeyValue(Windowed(key, Window(start, start + size)), value)

        return merge_sorted(self.name, runs, order, to_kv, reverse=reverse)

    def fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        """``KeyValue(Windowed, value)`` of windows with ``key_from <= key <= key_to`` and
        ``time_from <= start <= time_to`` (``None``: unbounded), by key then start."""
        return self._query(key_from, key_to, time_from, time_to, _by_key_start, False)

    def backward_fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        """As :meth:`fetch_key_range`, in reverse order."""
        return self._query(key_from, key_to, time_from, time_to, _by_key_start, True)

    def fetch_all(self, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        """``KeyValue(Windowed, value)`` of every window with ``time_from <= start <= time_to``
        (``None``: unbounded), by start then key."""
        return self._query(None, None, time_from, time_to, _by_start_key, False)

    def fetch_all_with_timestamps(
        self, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        """As :meth:`fetch_all`, yielding ``KeyValue(Windowed, ValueAndTimestamp)``."""
        return self._query(None, None, time_from, time_to, _by_start_key, False, True)

    def backward_fetch_all(self, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        """As :meth:`fetch_all`, in reverse order."""
        return self._query(None, None, time_from, time_to, _by_start_key, True)

    def all(self) -> list[KeyValue]:
        """Every live window, by start then key."""
        return self.fetch_all(None, None)

    def backward_all(self) -> list[KeyValue]:
        """Every live window, by start then key, in reverse order."""
        return self.backward_fetch_all(None, None)
