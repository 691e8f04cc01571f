"""Segments and retention shared by the window and session stores (docs/semantics.md §6).

Time-keyed data is split into segments of ``segment_interval_ms`` by a *segment timestamp* (window
start, session end). The store tracks ``observed_stream_time``, the largest segment timestamp of
any put or remove. With ``bound = observed_stream_time - retention``:

- a put whose segment id is below ``segment_id(bound)`` (the oldest live segment) is not stored
  and is counted in ``dropped-records``;
- segments below the oldest live segment are deleted;
- an entry whose segment timestamp is ``<= bound`` is expired: reads never return it, even while
  its segment still exists.

Bucket layout: ``{segment_id: {key: {sub_key: (value, timestamp)}}}``, where the sub key
orders one key's entries in time (window: ``(start, seqnum)``, session: ``(end, start)``). A
segment's keys are in no order: a range query sorts what it finds (state written when segments
were ``SortedDict`` objects loads as it is). Empty containers are always removed, so an empty
bucket is ``{}`` (falsy). A store may hold a key's entries otherwise (a window store with
duplicates: a list, see :mod:`kspark.state.window`) and then overrides the methods that reach
into them (:meth:`SegmentedStore._sub_items`, ``_set_entry``, ``_del_entry``, ``_get_entry``,
``_fill``, and ``_on_bucket_loaded`` for buckets saved in this layout).
A bucket filled by a bulk restore from nothing is held as a
:class:`~kspark.state.internals.packed.PackedBucket` until first used (``StoreBase._bucket``
builds it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any, Final

import numpy as np

from kspark.state.internals.base import DEFAULT_BUCKETS, StoreBase
from kspark.state.internals.common import check_name, order_error
from kspark.state.internals.packed import PackedBucket, key_codes, pack

#: one key's entries in one segment: ``{sub_key: (value, timestamp)}``, a plain dict (a key has a
#: handful of entries per segment, and a batch builds, loads and pickles one per key it touches:
#: a dict costs a fraction of a ``SortedDict`` to build and (un)pickle, and half of a dict
#: subclass to pickle; its few sub keys are sorted when read, see :func:`sub_keys`). State
#: written when this was a dict subclass of this name loads as plain dicts.
SubEntries = dict


def sub_keys(subs: dict[Any, Any], lo: Any = None, hi: Any = None) -> list[Any]:
    """The sub keys of ``subs`` in ``[lo, hi]`` (``None``: unbounded), ascending."""
    if len(subs) == 1:
        for only in subs:
            if (lo is None or only >= lo) and (hi is None or only <= hi):
                return [only]
        return []
    keys = sorted(subs)
    if lo is None and hi is None:
        return keys
    return [s for s in keys if (lo is None or s >= lo) and (hi is None or s <= hi)]


#: Marker returned by :meth:`SegmentedStore._write` when the target segment has expired.
EXPIRED: Final = object()

Entry = tuple[Any, int]  # (value, timestamp)


def default_segment_interval_ms(retention_ms: int) -> int:
    """The default segment interval of a store retaining ``retention_ms``."""
    return max(retention_ms // 2, 60_000)


segment_interval_ms = default_segment_interval_ms


def segment_id(timestamp: int, interval_ms: int) -> int:
    """The segment holding ``timestamp``."""
    return timestamp // interval_ms


def min_live_segment(observed_stream_time: int, retention_ms: int, interval_ms: int) -> int:
    """The oldest segment still live once the store has observed ``observed_stream_time``."""
    return segment_id(observed_stream_time - retention_ms, interval_ms)


class SegmentedStore(StoreBase):
    """Retention, segments and observed stream time of the window and session stores."""

    #: What the segment timestamp is, for messages ("window start", "session end").
    segment_time_name = "timestamp"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        segment_interval_ms: int | None = None,
        *,
        caching: bool = False,
        logging: bool = True,
        num_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        check_name(name)
        if retention_ms < 0:
            raise ValueError(f"store {name!r}: retention must be >= 0 ms, got {retention_ms}")
        interval = (
            default_segment_interval_ms(retention_ms)
            if segment_interval_ms is None
            else segment_interval_ms
        )
        if interval <= 0:
            raise ValueError(f"store {name!r}: segment interval must be > 0 ms, got {interval}")
        super().__init__(name, caching=caching, logging=logging, num_buckets=num_buckets)
        self.retention_ms = retention_ms
        self.segment_interval_ms = interval
        self.observed_stream_time = -1
        self._swept_below = self.min_live_segment()
        #: the observed stream time from which a segment more expires (a sweep is due)
        self._next_sweep = self._sweep_due()

    # -- time --------------------------------------------------------------------------------
    def segment_id(self, timestamp: int) -> int:
        return timestamp // self.segment_interval_ms

    def min_live_segment(self) -> int:
        """Segments below this id are expired and deleted."""
        return min_live_segment(
            self.observed_stream_time, self.retention_ms, self.segment_interval_ms
        )

    @property
    def expiry_bound(self) -> int:
        """Entries whose segment timestamp is ``<=`` this are expired."""
        return self.observed_stream_time - self.retention_ms

    def _observe(self, segment_ts: int) -> None:
        """Advance observed stream time; delete the segments that expire with it."""
        if segment_ts <= self.observed_stream_time:
            return
        self.observed_stream_time = segment_ts
        if segment_ts >= self._next_sweep:
            self._sweep_loaded()

    def _sweep_due(self) -> int:
        """The smallest observed stream time whose :meth:`min_live_segment` is past the
        segments swept so far."""
        return (self._swept_below + 1) * self.segment_interval_ms + self.retention_ms

    def _sweep_loaded(self) -> None:
        live = self.min_live_segment()
        if live <= self._swept_below:
            return
        self._swept_below = live
        self._next_sweep = self._sweep_due()
        for bucket, data in list(self._buckets.items()):
            if type(data) is PackedBucket:
                data = self._unpack(bucket, data)
            if self._drop_expired_segments(data):
                self._touch(bucket)

    def _drop_expired_segments(self, data: dict[int, Any]) -> bool:
        live = self.min_live_segment()
        expired = [seg for seg in data if seg < live]
        for seg in expired:
            del data[seg]
        return bool(expired)

    def advance_observed(self, timestamp: int) -> None:
        """Advance observed stream time to ``timestamp`` as a write there would (vectorised
        batch paths replay the clock of the record-by-record path with it)."""
        self._observe(timestamp)

    def _on_bucket_loaded(self, bucket: int, data: Any) -> None:
        if self._drop_expired_segments(data):
            self._touch(bucket)

    def meta(self) -> dict[str, Any]:
        return {"observed_stream_time": self.observed_stream_time}

    def restore_meta(self, meta: dict[str, Any]) -> None:
        self.observed_stream_time = max(
            self.observed_stream_time, int(meta.get("observed_stream_time", -1))
        )
        self._sweep_loaded()

    def _log_expired(self, store_key: Any, value: Any, timestamp: int) -> None:
        """Log a write the store dropped as expired (or keeps invisible), neither cached nor
        forwarded: Kafka Streams logs every write, and restoring drops it again."""
        if self.logging:
            self.context.log_change(self.name, store_key, value, timestamp)

    def _drop_detail(self, key: Any, segment_ts: int) -> str:
        live = self.min_live_segment()
        return (
            f"store {self.name!r}: skipping put of key {key!r} with {self.segment_time_name} "
            f"{segment_ts}: its segment {self.segment_id(segment_ts)} is older than the oldest "
            f"live segment {live} (observed stream time {self.observed_stream_time}, retention "
            f"{self.retention_ms} ms, live data has {self.segment_time_name} > "
            f"{self.expiry_bound})"
        )

    # -- bucket data -------------------------------------------------------------------------
    def _new_bucket(self) -> dict[int, Any]:
        return {}

    def bucket_entries(self, data: Any) -> int:
        """The windows or sessions held: one per key and sub-key of each segment."""
        if isinstance(data, PackedBucket):  # one entry per row
            return len(data)
        return sum(len(subs) for segment in data.values() for subs in segment.values())

    def _write(self, key: Any, segment_ts: int, sub: Any, value: Any, timestamp: int,
               emptied: list[int] | None = None) -> Any:
        """Observe ``segment_ts``, then store ``(value, timestamp)`` under ``(key, sub)`` (or
        delete it when ``value is None``). Returns :data:`EXPIRED` if the segment has expired
        (nothing done), else the previous live value or ``None``. With ``emptied``, a delete
        that leaves the key nothing in its segment keeps the key's empty entry there and
        appends the segment to ``emptied``, for :meth:`_drop_emptied`."""
        self._observe(segment_ts)
        seg = self.segment_id(segment_ts)
        if seg < self.min_live_segment():
            return EXPIRED
        bucket = self.bucket_of(key)
        if value is None:
            old = self._del_entry(bucket, key, seg, sub, emptied)
        else:
            old = self._set_entry(bucket, key, seg, sub, (value, timestamp))
        if old is None or segment_ts <= self.expiry_bound:
            return None
        return old[0]

    def _restore_columns(
        self,
        keys: Sequence[Any],
        segment_ts: np.ndarray,
        sub_hi: Sequence[int] | np.ndarray,
        sub_lo: Sequence[int] | np.ndarray,
        values: Sequence[Any],
        timestamps: Sequence[int] | np.ndarray,
    ) -> None:
        """Apply writes given as columns (write ``i``: ``keys[i]``, ``segment_ts[i]``, sub key
        ``(sub_hi[i], sub_lo[i])``, ``values[i]`` or ``None`` to delete, ``timestamps[i]``) in
        order, as :meth:`_write` one after another would leave the store, in bulk: stream time
        is observed once (a write that was live when made but expires by the end is swept
        either way), and the writes are sorted by bucket, segment, key code and sub key (keeping
        their order within a sub key). A bucket that holds nothing takes its writes packed
        (:mod:`~kspark.state.internals.packed`); one that has data takes them into its
        segments, each segment its new keys at once."""
        if len(keys) == 1:  # a record-by-record restore: nothing to sort or group
            self._write(keys[0], int(segment_ts[0]), (int(sub_hi[0]), int(sub_lo[0])),
                        values[0], int(timestamps[0]))
            return
        stamps = np.asarray(segment_ts, dtype=np.int64)
        if not len(stamps):
            return
        try:
            codes, distinct = key_codes(keys)
        except TypeError as e:
            raise order_error(self.name, e) from e
        buckets = np.asarray(self.buckets_of(distinct), dtype=np.int64)[codes]
        self._observe(int(stamps.max()))
        segs = stamps // self.segment_interval_ms
        live = np.flatnonzero(segs >= self.min_live_segment())
        if not len(live):
            return
        hi = np.asarray(sub_hi, dtype=np.int64)[live]
        lo = np.asarray(sub_lo, dtype=np.int64)[live]
        order = np.lexsort((lo, hi, codes[live], segs[live], buckets[live]))
        rows = live[order]
        codes, segs, buckets, hi, lo = codes[rows], segs[rows], buckets[rows], hi[order], lo[order]
        stamps = np.asarray(timestamps, dtype=np.int64)[rows]
        cuts = [0, *(np.flatnonzero(buckets[1:] != buckets[:-1]) + 1).tolist(), len(rows)]
        for a, b in pairwise(cuts):
            bucket = int(buckets[a])
            data = self._bucket(bucket, create=False)
            if not data:
                packed = pack(distinct, codes[a:b], segs[a:b], hi[a:b], lo[a:b], values,
                              rows[a:b], stamps[a:b])
                if packed is not None:
                    self._hold(bucket, packed)
                    self._touch(bucket)
                continue
            self._fill(bucket, data, distinct, codes[a:b], segs[a:b],
                       list(zip(hi[a:b].tolist(), lo[a:b].tolist())),
                       [values[i] for i in rows[a:b].tolist()], stamps[a:b].tolist())

    def _fill(self, bucket: int, data: dict[int, Any], keys: list[Any], codes: np.ndarray,
              segs: np.ndarray, subs: list[Any], values: list[Any], timestamps: list[int]
              ) -> None:
        """Apply writes to ``bucket`` (its data ``data``), sorted by segment and key code
        (``codes`` index ``keys``, one code per distinct key), a key's writes in the order made;
        ``values[i] is None`` deletes."""
        n = len(codes)
        new_seg = np.empty(n, dtype=bool)
        new_seg[0] = True
        new_seg[1:] = segs[1:] != segs[:-1]
        new_run = new_seg.copy()
        new_run[1:] |= codes[1:] != codes[:-1]
        runs = np.flatnonzero(new_run)
        entries = list(zip(values, timestamps))
        deletes = any(v is None for v in values)
        ends = [*runs[1:].tolist(), n]
        last_of_seg = [e == n or bool(new_seg[e]) for e in ends]
        self._touch(bucket)
        segment: Any = None
        fresh: dict[Any, dict[Any, Entry]] = {}
        for a, b, code, first, last, seg in zip(
            runs.tolist(), ends, codes[runs].tolist(), new_seg[runs].tolist(), last_of_seg,
            segs[runs].tolist(),
        ):
            if first:
                segment = data.get(seg)
                if segment is None:
                    segment = data[seg] = {}
            key = keys[code]
            entry_subs = segment.get(key)
            known = entry_subs is not None
            if not known:
                entry_subs = {}
            if b - a == 1 and entries[a][0] is not None:
                entry_subs[subs[a]] = entries[a]
            elif deletes:
                for sub, entry in zip(subs[a:b], entries[a:b]):
                    if entry[0] is None:
                        entry_subs.pop(sub, None)
                    else:
                        entry_subs[sub] = entry
            else:
                entry_subs.update(zip(subs[a:b], entries[a:b]))
            if entry_subs:
                if not known:
                    fresh[key] = entry_subs
            elif known:
                del segment[key]
            if last:
                if fresh:
                    segment.update(fresh)
                    fresh = {}
                if not segment:
                    del data[seg]

    def _unpack(self, bucket: int, packed: PackedBucket) -> dict[int, Any]:
        data: dict[int, Any] = self._new_bucket()
        self._buckets[bucket] = data
        self._fill(bucket, data, packed.keys, packed.codes, packed.segs,
                   list(zip(packed.sub_hi.tolist(), packed.sub_lo.tolist())), packed.values,
                   packed.timestamps.tolist())
        return data

    def _set_entry(self, bucket: int, key: Any, seg: int, sub: Any, entry: Entry) -> Entry | None:
        data: dict[int, Any] = self._bucket(bucket, create=True)
        segment: dict[Any, Any] | None = data.get(seg)
        if segment is None:
            segment = data[seg] = {}
        subs: dict[Any, Any] | None = segment.get(key)
        if subs is None:
            segment[key] = subs = {}
        old = subs.get(sub)
        subs[sub] = entry
        self._touch(bucket)
        return old

    def _del_entry(self, bucket: int, key: Any, seg: int, sub: Any,
                   emptied: list[int] | None = None) -> Entry | None:
        data: dict[int, Any] | None = self._bucket(bucket, create=False)
        if not data:
            return None
        segment: dict[Any, Any] | None = data.get(seg)
        if segment is None:
            return None
        subs: dict[Any, Any] | None = segment.get(key)
        if subs is None:
            return None
        old = subs.pop(sub, None)
        if old is None:
            return None
        if not subs:
            if emptied is not None:
                emptied.append(seg)
            else:
                del segment[key]
                if not segment:
                    del data[seg]
        self._touch(bucket)
        return old

    def _drop_emptied(self, key: Any, emptied: list[int]) -> None:
        """Remove ``key`` from the segments ``emptied`` where its entry is (still) empty, and
        the segments left empty (after :meth:`_write` with ``emptied``)."""
        data = self._bucket_for(key, create=False)
        if not data:
            return
        for seg in emptied:
            segment = data.get(seg)
            if segment is not None and not segment.get(key, True):
                del segment[key]
                if not segment:
                    del data[seg]

    def _get_entry(self, key: Any, seg: int, sub: Any) -> Entry | None:
        data: dict[int, Any] | None = self._bucket_for(key, create=False)
        if not data:
            return None
        segment: dict[Any, Any] | None = data.get(seg)
        if segment is None:
            return None
        subs: dict[Any, Any] | None = segment.get(key)
        return None if subs is None else subs.get(sub)

    def _sub_items(self, subs: Any, lo: Any, hi: Any) -> list[tuple[Any, Entry]]:
        """``(sub, entry)`` of one key's entries in a segment with ``lo <= sub <= hi``
        (``None``: unbounded), ascending by sub key."""
        entries: dict[Any, Entry] = subs
        return [(sub, entries[sub]) for sub in sub_keys(entries, lo, hi)]

    @staticmethod
    def _segments(data: dict[int, Any], seg_lo: int | None, seg_hi: int | None) -> list[int]:
        if seg_lo is not None and seg_hi is not None and seg_hi - seg_lo < 4:
            return [s for s in range(seg_lo, seg_hi + 1) if s in data]
        return sorted(
            s for s in data if (seg_lo is None or s >= seg_lo) and (seg_hi is None or s <= seg_hi)
        )

    def _key_entries(
        self,
        key: Any,
        seg_lo: int | None,
        seg_hi: int | None,
        sub_lo: Any,
        sub_hi: Any,
    ) -> Iterator[tuple[Any, Entry]]:
        """``(sub, entry)`` of one key with ``sub_lo <= sub <= sub_hi`` (``None``: unbounded)
        in ascending sub order (segments are ordered by the first component of the sub key)."""
        data: dict[int, Any] | None = self._bucket_for(key, create=False)
        if not data:
            return
        for seg in self._segments(data, seg_lo, seg_hi):
            subs: Any = data[seg].get(key)
            if subs:
                yield from self._sub_items(subs, sub_lo, sub_hi)

    def _range_runs(
        self,
        key_lo: Any,
        key_hi: Any,
        seg_lo: int | None,
        seg_hi: int | None,
        sub_lo: Any,
        sub_hi: Any,
    ) -> list[list[tuple[Any, Any, Entry]]]:
        """Per bucket, every ``(key, sub, entry)`` with the key in ``[key_lo, key_hi]`` and the
        sub key in ``[sub_lo, sub_hi]`` (``None``: unbounded), in no particular order."""
        runs = []
        try:
            for _, data in self._all_buckets():
                if not data:
                    continue
                run = []
                for seg in self._segments(data, seg_lo, seg_hi):
                    segment = data[seg]
                    for key, subs in segment.items():
                        if ((key_lo is None or key >= key_lo)
                                and (key_hi is None or key <= key_hi)):
                            for sub, entry in self._sub_items(subs, sub_lo, sub_hi):
                                run.append((key, sub, entry))
                runs.append(run)
        except TypeError as e:
            raise order_error(self.name, e) from e
        return runs
