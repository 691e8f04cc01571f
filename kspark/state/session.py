"""The in-memory session store (KIP-94): aggregates keyed by ``(key, end, start)``, segmented
by session end (docs/semantics.md §6)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from kspark.records import KeyValue
from kspark.state.internals.base import DEFAULT_BUCKETS
from kspark.state.internals.common import merge_sorted
from kspark.state.internals.segments import EXPIRED, SegmentedStore
from kspark.windows import Window, Windowed


def _end_start(item: tuple[Any, ...]) -> tuple[int, int]:
    return (item[0], item[1])


def _by_key_time(item: tuple[Any, Any, Any]) -> Any:
    return (item[0], item[1])


def _by_time_key(item: tuple[Any, Any, Any]) -> Any:
    return (item[1], item[0])


def _to_kv(item: tuple[Any, Any, Any]) -> KeyValue:
    key, (end, start), entry = item
    return KeyValue(Windowed(key, Window(start, end)), entry[0])


class InMemorySessionStore(SegmentedStore):
    """Session aggregates by ``Windowed(key, Window(start, end))``, kept for ``retention_ms``
    after their end. The store key is the ``Windowed``; one key's sessions are ordered by
    ``(end, start)``."""

    kind = "session"
    segment_time_name = "session end"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        segment_interval_ms: int | None = None,
        caching: bool = False,
        logging: bool = True,
        num_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        super().__init__(
            name,
            retention_ms,
            segment_interval_ms,
            caching=caching,
            logging=logging,
            num_buckets=num_buckets,
        )

    def _live(self, end: int) -> bool:
        return end > self.expiry_bound

    def _check_key(self, key: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: key must not be None")

    # -- writes ------------------------------------------------------------------------------
    def put(self, windowed: object, agg: Any, timestamp: int | None = None) -> None:
        """Store ``agg`` for the session ``windowed`` (``None`` removes it). ``timestamp``
        defaults to the session end."""
        # ``windowed`` is checked here, for an error naming the store (typed as ``Windowed``,
        # the compiled module would refuse anything else with a bare TypeError)
        self._check_writable(windowed.key if isinstance(windowed, Windowed) else None)
        if not isinstance(windowed, Windowed):
            raise TypeError(f"store {self.name!r}: expected a Windowed key, got {windowed!r}")
        self._put(windowed, agg, windowed.window.end if timestamp is None else timestamp)

    def _put(self, windowed: Windowed, agg: Any, ts: int, emptied: list[int] | None = None
             ) -> None:
        """:meth:`put` without its checks (``emptied``: see :meth:`SegmentedStore._write`)."""
        start, end = windowed.window.start, windowed.window.end
        old = self._write(windowed.key, end, (end, start), agg, ts, emptied)
        if old is EXPIRED or (agg is not None and not self._live(end)):
            # expired: dropped (counted), or stored in a live segment but invisible; logged all
            # the same (as Kafka Streams logs every write), neither cached nor forwarded
            if old is EXPIRED and agg is not None:
                self.context.record_dropped("expired-segment", self._drop_detail(windowed, end))
            self._log_expired(windowed, agg, ts)
            return
        # A remove is logged even when nothing was stored: its session end moves observed
        # stream time, and the changelog must carry that to rebuild the store exactly.
        self._changed(windowed, old, agg, ts)

    def remove(self, windowed: object, timestamp: int | None = None) -> None:
        """Remove the session ``windowed``."""
        self.put(windowed, None, timestamp)

    def replace_sessions(
        self,
        key: Any,
        removed: Sequence[tuple[int, int]],
        start: int,
        end: int,
        agg: Any,
        timestamp: int,
    ) -> None:
        """Remove ``key``'s sessions ``(end, start)`` of ``removed``, then store ``agg`` for
        ``[start, end]``, all at ``timestamp``: what :meth:`remove` of each and :meth:`put`
        leave, log and cache (a session aggregation's write for one record). A key whose last
        entry in a segment is removed stays in the segment's keys until the put, so a
        session that moves within its segment does not leave and rejoin them."""
        self._check_writable(key)
        if len(removed) == 1 and agg is not None and self._move_in_segment(
                key, removed[0], start, end, agg, timestamp):
            return
        emptied: list[int] = []
        for e, s in removed:
            self._put(Windowed(key, Window(s, e)), None, timestamp, emptied)
        self._put(Windowed(key, Window(start, end)), agg, timestamp)
        if emptied:
            self._drop_emptied(key, emptied)

    def _move_in_segment(self, key: Any, old: tuple[int, int], start: int, end: int, agg: Any,
                         timestamp: int) -> bool:
        """:meth:`replace_sessions` of one session ``old`` (``(end, start)``) by ``[start, end]``
        in the same live segment, the key's entry there existing: one look-up of the key's
        entries instead of a remove and a put. ``False``, with nothing done, otherwise."""
        old_end = old[0]
        interval, retention = self.segment_interval_ms, self.retention_ms
        seg = end // interval
        if old_end // interval != seg:
            return False
        # the clocks the remove and then the put would see
        at_remove = max(self.observed_stream_time, old_end)
        at_put = max(at_remove, end)
        if seg < (at_put - retention) // interval or end <= at_put - retention:
            return False  # expired, or stored but not live: the general path drops and logs
        bucket = self.bucket_of(key)
        data = self._bucket(bucket, create=False)
        segment = None if not data else data.get(seg)
        subs = None if segment is None else segment.get(key)
        if subs is None:
            return False
        self._observe(at_put)
        entry = subs.pop(old, None)
        window = (end, start)
        prior = subs.get(window)
        subs[window] = (agg, timestamp)
        self._touch(bucket)
        self._changed(Windowed(key, Window(old[1], old_end)),
                      None if entry is None or old_end <= at_remove - retention else entry[0],
                      None, timestamp)
        self._changed(Windowed(key, Window(start, end)), None if prior is None else prior[0],
                      agg, timestamp)
        return True

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        entries = list(changelog)
        ends = np.array([w.window.end for w, _, _ in entries], dtype=np.int64)
        self._restore_columns(
            [w.key for w, _, _ in entries],
            ends,
            ends,
            [w.window.start for w, _, _ in entries],
            [agg for _, agg, _ in entries],
            [ts for _, _, ts in entries],
        )

    # -- raw access for vectorised batch paths ----------------------------------------------
    def raw_sessions(self, key: Any, bucket: int) -> list[tuple[int, int, Any, int]]:
        """``(end, start, agg, timestamp)`` of every stored session of ``key`` (whose bucket is
        ``bucket``), expired ones included, ascending by (end, start); loads the bucket."""
        data = self._bucket(bucket, create=False)
        if not data:
            return []
        out = []
        for segment in data.values():
            subs = segment.get(key)
            if subs:
                out += [(end, start, entry[0], entry[1])
                        for (end, start), entry in subs.items()]
        if len(out) > 1:
            out.sort(key=_end_start)
        return out

    def stored_keys(self, keys: Sequence[Any], buckets: Sequence[int]) -> set[int]:
        """The indices of ``keys`` (whose buckets are ``buckets``) with any stored session,
        expired ones included (those :meth:`raw_sessions` gives something for), found per
        bucket and segment by set intersection; loads each of their buckets."""
        by_bucket = np.asarray(buckets, dtype=np.int64)
        order = np.argsort(by_bucket, kind="stable")
        cuts = np.flatnonzero(np.diff(by_bucket[order])) + 1
        found: set[int] = set()
        for run in np.split(order, cuts) if len(order) else ():
            data = self._bucket(int(by_bucket[run[0]]), create=False)
            if not data:
                continue
            wanted = {keys[i]: i for i in run.tolist()}
            for segment in data.values():
                found.update(wanted[k] for k in dict.keys(segment) & wanted.keys())
        return found

    def raw_ending(self, lo: int, hi: int) -> list[tuple[int, int, Any, Any]]:
        """``(end, start, key, agg)`` of every live session with ``lo <= end < hi``, in no
        particular order, reading one bucket at a time and only the segments that can hold
        such ends."""
        bound, interval = self.expiry_bound, self.segment_interval_ms
        out = []
        for _, data in self._all_buckets():
            for seg, segment in data.items():
                if (seg + 1) * interval <= lo or seg * interval >= hi:
                    continue
                for key, subs in segment.items():
                    out += [(end, start, key, entry[0]) for (end, start), entry in subs.items()
                            if lo <= end < hi and end > bound]
        return out

    def apply_raw(
        self,
        changes: Iterable[tuple[Any, int, Iterable[tuple[int, int]],
                                Iterable[tuple[int, int, Any, int]]]],
    ) -> None:
        """For each ``(key, bucket, removes, puts)``: delete the key's sessions ``(end, start)``
        of ``removes``, then store the ``(end, start, agg, timestamp)`` of ``puts``, without
        clocks, change tracking or checks; segments below the oldest live segment are skipped
        (a sweep would delete them). Marks each key's bucket dirty.

        A key's entries in a segment are changed in place, and the key leaves (or joins) the
        segment's keys only when its last entry there goes (or its first comes)."""
        live = self.min_live_segment()
        interval = self.segment_interval_ms
        for key, bucket, removes, puts in changes:
            data = self._bucket(bucket, create=True)
            touched: dict[int, dict[Any, Any]] = {}
            for end, start in removes:
                seg = end // interval
                subs = touched.get(seg)
                if subs is None:
                    segment = data.get(seg)
                    subs = None if segment is None else segment.get(key)
                    if subs is None:
                        continue
                    touched[seg] = subs
                subs.pop((end, start), None)
            for end, start, agg, timestamp in puts:
                seg = end // interval
                if seg < live:
                    continue
                subs = touched.get(seg)
                if subs is None:
                    segment = data.get(seg)
                    subs = None if segment is None else segment.get(key)
                    if subs is None:
                        subs = {}
                    touched[seg] = subs
                subs[(end, start)] = (agg, timestamp)
            for seg, subs in touched.items():
                segment = data.get(seg)
                if subs:
                    if segment is None:
                        segment = data[seg] = {}
                    if key not in segment:
                        segment[key] = subs
                elif segment is not None and key in segment:
                    del segment[key]
                    if not segment:
                        del data[seg]
            self._dirty_buckets.add(bucket)

    # -- reads -------------------------------------------------------------------------------
    def _current(self, store_key: Any) -> Any:
        start, end = store_key.window.start, store_key.window.end
        if not self._live(end):
            return None
        entry = self._get_entry(store_key.key, self.segment_id(end), (end, start))
        return None if entry is None else entry[0]

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of ``key``'s session ``[start, end]``, or ``None``."""
        self._check_key(key)
        return self._current(Windowed(key, Window(start, end)))

    def sessions_reaching(
        self, key: Any, earliest_end: int | None, latest_start: int | None
    ) -> list[tuple[int, int, Any]]:
        """``(end, start, agg)`` of ``key``'s live sessions with ``end >= earliest_end`` and
        ``start <= latest_start`` (``None``: unbounded), ascending by (end, start): what
        :meth:`find_sessions` finds, without a ``KeyValue`` per session."""
        if key is None:
            self._check_key(key)
        bound = self.expiry_bound
        lowest = bound + 1 if earliest_end is None or earliest_end <= bound else earliest_end
        highest = latest_start
        data = self._bucket(self.bucket_of(key), create=False)
        if not data:
            return []
        out = []
        for segment in data.values():  # raw_sessions, filtered on the way
            subs = segment.get(key)
            if subs:
                out += [(end, start, entry[0]) for (end, start), entry in subs.items()
                        if end >= lowest and (highest is None or start <= highest)]
        if len(out) > 1:
            out.sort(key=_end_start)
        return out

    def _find(self, key: Any, earliest_end: int | None, latest_start: int | None) -> list[KeyValue]:
        return [KeyValue(Windowed(key, Window(start, end)), agg)
                for end, start, agg in self.sessions_reaching(key, earliest_end, latest_start)]

    def find_sessions(
        self, key: Any, earliest_session_end: int | None, latest_session_start: int | None
    ) -> list[KeyValue]:
        """``KeyValue(Windowed, agg)`` of ``key``'s sessions with ``end >= earliest_session_end``
        and ``start <= latest_session_start`` (``None``: unbounded), ascending by (end, start)."""
        return self._find(key, earliest_session_end, latest_session_start)

    def backward_find_sessions(
        self, key: Any, earliest_session_end: int | None, latest_session_start: int | None
    ) -> list[KeyValue]:
        """As :meth:`find_sessions`, descending by (end, start)."""
        return self._find(key, earliest_session_end, latest_session_start)[::-1]

    def fetch(self, key: Any) -> list[KeyValue]:
        """Every session of ``key``, ascending by (end, start)."""
        return self._find(key, None, None)

    def backward_fetch(self, key: Any) -> list[KeyValue]:
        """Every session of ``key``, descending by (end, start)."""
        return self._find(key, None, None)[::-1]

    def _query(
        self,
        key_from: Any,
        key_to: Any,
        earliest_end: int | None,
        latest_start: int | None,
        order: Callable[[tuple[Any, Any, Any]], Any],
        reverse: bool,
    ) -> list[KeyValue]:
        bound = self.expiry_bound
        seg_lo = None if earliest_end is None else self.segment_id(earliest_end)
        lo = None if earliest_end is None else (earliest_end,)
        runs = self._range_runs(key_from, key_to, seg_lo, None, lo, None)
        runs = [
            [
                item
                for item in run
                if item[1][0] > bound and (latest_start is None or item[1][1] <= latest_start)
            ]
            for run in runs
        ]
        return merge_sorted(self.name, runs, order, _to_kv, reverse=reverse)

    def find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end: int | None,
        latest_session_start: int | None,
    ) -> list[KeyValue]:
        """As :meth:`find_sessions` for every key in ``[key_from, key_to]`` (``None``:
        unbounded), ordered by key then (end, start)."""
        return self._query(
            key_from, key_to, earliest_session_end, latest_session_start, _by_key_time, False
        )

    def backward_find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end: int | None,
        latest_session_start: int | None,
    ) -> list[KeyValue]:
        """As :meth:`find_sessions_range`, in reverse order."""
        return self._query(
            key_from, key_to, earliest_session_end, latest_session_start, _by_key_time, True
        )

    def all(self) -> list[KeyValue]:
        """Every live session, ordered by end, start, then key."""
        return self._query(None, None, None, None, _by_time_key, False)

    def backward_all(self) -> list[KeyValue]:
        """Every live session, in the reverse order of :meth:`all`."""
        return self._query(None, None, None, None, _by_time_key, True)
