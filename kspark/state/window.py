"""The in-memory window store: values keyed by ``(key, window start)``, segmented by window
start (docs/semantics.md §6)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import numpy as np

from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state.internals.base import DEFAULT_BUCKETS
from kspark.state.internals.common import merge_sorted
from kspark.state.internals.segments import EXPIRED, Entry, SegmentedStore
from kspark.windows import Window, Windowed

_INF: Final = math.inf
#: sequence numbers of a store with duplicates wrap at Java's Integer.MAX_VALUE, as Kafka Streams'
_MAX_INT: Final = (1 << 31) - 1


def _by_start_key(item: tuple[Any, Any, Any]) -> Any:
    key, (start, seq), _ = item
    return (start, key, seq)


def _by_key_start(item: tuple[Any, Any, Any]) -> Any:
    return (item[0], item[1])


def _start_seq(item: tuple[Any, ...]) -> tuple[int, int]:
    return item[0], item[1]


def _held(data: dict[int, Any] | None, seg: int, key: Any) -> list[Any] | None:
    """A key's entries in segment ``seg`` of a bucket's ``data`` (a store with duplicates)."""
    segment: dict[Any, Any] | None = None if not data else data.get(seg)
    return None if segment is None else segment.get(key)


def _collect_values(segment: dict[Any, Any] | None, key: Any, time_from: int, time_to: int,
                    out: list[tuple[int, Any]]) -> None:
    """Append ``(start, value)`` of ``key``'s entries in ``segment`` starting in the range."""
    held: list[tuple[Any, ...]] | None = None if segment is None else segment.get(key)
    if not held:
        return
    for item in held:
        start: int = item[0]
        if start > time_to:
            break
        if start >= time_from:
            out.append((item[0], item[2]))  # the held int, not a new one


def _position(held: list[Any], sub: tuple[int, int]) -> tuple[int, bool]:
    """Where sub key ``sub`` is (or would go) among a key's entries, and whether it is there."""
    i = bisect.bisect_left(held, sub, key=_start_seq)
    return i, i < len(held) and _start_seq(held[i]) == sub


class InMemoryWindowStore(SegmentedStore):
    """Values of fixed-size windows by key and window start, kept for ``retention_ms``.

    The store key (changelog, flush listener) is ``Windowed(key, Window(start, start + size))``,
    or ``(Windowed, seqnum)`` when duplicates are retained. Entries of one key and start are
    ordered by sub key ``(start, seqnum)`` (seqnum is 0 without duplicates, else 1, 2, ... as
    Kafka Streams numbers them).

    With duplicates a key's entries in a segment are a list of ``(start, seqnum, value,
    timestamp)`` in sub-key order (a join's store: each record adds one, mostly at the end, and
    none is replaced or removed but by expiry), not a dict by sub key.
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
        #: whether the sequence number has wrapped (then a put may meet its own sub key)
        self._wrapped = False

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
            seq = (self._seqnum + 1) & _MAX_INT
            if seq <= self._seqnum:
                self._wrapped = True
            self._seqnum = seq
            if value is None:
                self._changed(self._store_key(key, window_start, seq), None, None, timestamp)
                return
            if not self.caching and not self.logs_changes:  # no change to record
                old = self._add(key, window_start, seq, value, timestamp)
                if old is EXPIRED:
                    self.context.record_dropped("expired-segment",
                                                self._drop_detail(key, window_start))
                return
            old = self._add(key, window_start, seq, value, timestamp)
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

    # -- a store with duplicates: a key's entries as a list ----------------------------------
    def _add(self, key: Any, start: int, seq: int, value: Any, timestamp: int) -> Any:
        """:meth:`_write` of a value a store with duplicates puts under a new sequence number:
        appended to the key's list, unless the number has wrapped (then it replaces an entry
        with the same sub key, as Kafka Streams' store does)."""
        if self._wrapped:
            return self._write(key, start, (start, seq), value, timestamp)
        self._observe(start)
        seg = self.segment_id(start)
        if seg < self.min_live_segment():
            return EXPIRED
        bucket = self.bucket_of(key)
        data: dict[int, Any] = self._bucket(bucket, create=True)
        segment: dict[Any, Any] | None = data.get(seg)
        if segment is None:
            segment = data[seg] = {}
        at: object = start  # one int object for both when the window starts at the record
        item = (at, seq, value, at if timestamp == start else timestamp)
        held: list[tuple[Any, ...]] | None = segment.get(key)
        if held is None:
            segment[key] = [item]
        elif start >= held[-1][0]:  # seq is the largest yet
            held.append(item)
        else:
            bisect.insort(held, item, key=_start_seq)
        self._touch(bucket)
        return None

    def _set_entry(self, bucket: int, key: Any, seg: int, sub: Any, entry: Entry
                   ) -> Entry | None:
        if not self.retain_duplicates:
            return super()._set_entry(bucket, key, seg, sub, entry)
        data: dict[int, Any] = self._bucket(bucket, create=True)
        segment: dict[Any, Any] | None = data.get(seg)
        if segment is None:
            segment = data[seg] = {}
        item = (sub[0], sub[1], entry[0], entry[1])
        self._touch(bucket)
        held: list[Any] | None = segment.get(key)
        if held is None:
            segment[key] = [item]
            return None
        i, found = _position(held, (sub[0], sub[1]))
        if not found:
            held.insert(i, item)
            return None
        old = held[i]
        held[i] = item
        return old[2], old[3]

    def _del_entry(self, bucket: int, key: Any, seg: int, sub: Any,
                   emptied: list[int] | None = None) -> Entry | None:
        if not self.retain_duplicates:
            return super()._del_entry(bucket, key, seg, sub, emptied)
        data: dict[int, Any] | None = self._bucket(bucket, create=False)
        held = _held(data, seg, key)
        if not held:
            return None
        i, found = _position(held, (sub[0], sub[1]))
        if not found:
            return None
        old = held.pop(i)
        if not held:
            assert data is not None
            segment: dict[Any, Any] = data[seg]
            del segment[key]
            if not segment:
                del data[seg]
        self._touch(bucket)
        return old[2], old[3]

    def _get_entry(self, key: Any, seg: int, sub: Any) -> Entry | None:
        if not self.retain_duplicates:
            return super()._get_entry(key, seg, sub)
        held = _held(self._bucket_for(key, create=False), seg, key)
        if not held:
            return None
        i, found = _position(held, (sub[0], sub[1]))
        return (held[i][2], held[i][3]) if found else None

    def _sub_items(self, subs: Any, lo: Any, hi: Any) -> list[tuple[Any, Entry]]:
        if not self.retain_duplicates:
            return super()._sub_items(subs, lo, hi)
        out: list[tuple[Any, Entry]] = []
        for item in subs:
            sub = (item[0], item[1])
            if (lo is None or sub >= lo) and (hi is None or sub <= hi):
                out.append((sub, (item[2], item[3])))
        return out

    def _fill(self, bucket: int, data: dict[int, Any], keys: list[Any], codes: np.ndarray,
              segs: np.ndarray, subs: list[Any], values: list[Any], timestamps: list[int]
              ) -> None:
        if not self.retain_duplicates:
            super()._fill(bucket, data, keys, codes, segs, subs, values, timestamps)
            return
        self._touch(bucket)
        seg_of, code_of = segs.tolist(), codes.tolist()
        n, i = len(code_of), 0
        while i < n:
            seg, code = seg_of[i], code_of[i]
            j = i + 1
            while j < n and seg_of[j] == seg and code_of[j] == code:
                j += 1
            segment: dict[Any, Any] | None = data.get(seg)
            if segment is None:
                segment = data[seg] = {}
            key = keys[code]
            held: list[Any] | None = segment.get(key)
            merged: dict[Any, Any] = {} if held is None else {(e[0], e[1]): e for e in held}
            for r in range(i, j):
                sub = subs[r]
                if values[r] is None:
                    merged.pop(sub, None)
                else:
                    merged[sub] = (sub[0], sub[1], values[r], timestamps[r])
            if merged:
                segment[key] = sorted(merged.values(), key=_start_seq)
            elif held is not None:
                del segment[key]
            if not segment:
                del data[seg]
            i = j

    def _on_bucket_loaded(self, bucket: int, data: Any) -> None:
        if self.retain_duplicates:
            # a bucket saved before a key's entries were a list holds a dict by sub key
            for segment in data.values():
                for key, held in list(segment.items()):
                    if isinstance(held, list):
                        break  # a bucket is saved in one layout
                    segment[key] = [(sub[0], sub[1], entry[0], entry[1])
                                    for sub, entry in sorted(held.items())]
                    self._touch(bucket)
        super()._on_bucket_loaded(bucket, data)

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
        """:meth:`fetch_range` with both bounds as ``(start, value)`` pairs: a join's read."""
        self._check_key(key)
        data: dict[int, Any] | None = self._bucket_for(key, create=False)
        if not data:
            return []
        bound = self.expiry_bound + 1
        time_from = bound if time_from < bound else time_from
        seg_lo, seg_hi = self.segment_id(time_from), self.segment_id(time_to)
        if not self.retain_duplicates:
            return [(sub[0], entry[0]) for sub, entry in
                    self._key_entries(key, seg_lo, seg_hi, (time_from,), (time_to, _INF))]
        out: list[tuple[int, Any]] = []
        if seg_hi - seg_lo < 4:  # a join window spans a segment or two
            for seg in range(seg_lo, seg_hi + 1):
                _collect_values(data.get(seg), key, time_from, time_to, out)
        else:
            for seg in self._segments(data, seg_lo, seg_hi):
                _collect_values(data[seg], key, time_from, time_to, out)
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
