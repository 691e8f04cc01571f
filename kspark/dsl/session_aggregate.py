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

from collections.abc import Callable
from typing import Any

import numpy as np
from sortedcontainers import SortedSet

from kspark.dsl.aggregations import Aggregation, Count
from kspark.dsl.processors import change_forwarder
from kspark.dsl.time_window_aggregate import (
    LAST_EMIT,
    OBSERVED,
    drop_expired,
    drop_null,
    emit_strategy_type,
    materialized_options,
    observe,
    resolve_retention,
)
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import BatchProcessor, RecordBatch, StreamTimeFollower
from kspark.record_columns import NewValues, RecordColumns, WindowedKeys
from kspark.records import Change, Record, event_time
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
        self.store: Any = context.get_state_store(self.store_name)
        self.state = context.processor_state
        self.caching = False if self.emit_final else self.store.set_flush_listener(
            change_forwarder(context), batched=True
        )
        #: on_window_close: ``(end, start, key)`` of stored sessions not yet forwarded, built
        #: from the store on first use (so also after a restart)
        self._pending: SortedSet | None = None
        #: set while :meth:`process_batch` runs single records: emission is computed there
        self._in_batch = False

    def _forward_update(self, windowed: Windowed, new: Any, old: Any) -> None:
        if not self.emit_final and not self.caching:
            self.context.forward(Record(windowed, Change(new, old), windowed.window.end))

    def process(self, record: Record) -> None:
        if drop_null(self.context, record):
            return
        key, ts = record.key, event_time(record)
        gap = self.windows.inactivity_gap_ms
        observed = observe(self.state, ts)
        close = observed - self.windows.grace_ms - gap
        closed = self._closed_sessions(close) if self.emit_final and not self._in_batch else None

        found = self.store.find_sessions(key, ts - gap, ts + gap)
        start, end, agg = merged_session(
            key, ts, [(kv.key.window.start, kv.key.window.end, kv.value) for kv in found],
            self.initializer, self.merger,
        )
        merged = Window(start, end)
        removed: set[Windowed] = set()
        if end < close:
            drop_expired(self.context, record, merged, close, observed)
        else:
            if start != ts or end != ts:
                for kv in found:
                    self.store.remove(kv.key)
                    removed.add(kv.key)
                    self._forward_update(kv.key, None, kv.value)
            agg = self.aggregator(key, record.value, agg)
            windowed = Windowed(key, merged)
            self.store.put(windowed, agg)
            self._forward_update(windowed, agg, None)
            if self._pending is not None:
                for w in removed:
                    self._pending.discard((w.window.end, w.window.start, key))
                self._pending.add((end, start, key))

        if closed is not None:
            for windowed, final in closed:
                if windowed not in removed:
                    self.context.forward(Record(windowed, Change(final, None), windowed.window.end))
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
                    self.context.forward(Record(windowed, Change(final, None), windowed.window.end))
                self.state[LAST_EMIT] = close

    def _closed_sessions(self, close: int) -> list[tuple[Windowed, Any]] | None:
        """Sessions with ``last emitted close <= end < close`` (with their aggregates, read
        before this record changes the store), or ``None`` if the close time has not moved."""
        last = self.state.get(LAST_EMIT)
        if last is not None and close <= last:
            return None
        pending = self._pending
        if pending is None:
            floor = -1 if last is None else last
            pending = self._pending = SortedSet(
                (kv.key.window.end, kv.key.window.start, kv.key.key)
                for kv in self.store.all()
                if kv.key.window.end >= floor
            )
        out = []
        while pending and pending[0][0] < close:
            end, start, key = pending.pop(0)
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
        ):
            return None
        return SessionBatch(self, view, observed, last_emit).run()


def merged_session(
    key: Any,
    ts: int,
    found: list[tuple[int, int, Any]],
    initializer: Callable[[], Any],
    merger: Callable[[Any, Any, Any], Any],
) -> tuple[int, int, Any]:
    """The session a record of ``key`` at ``ts`` joins, from the sessions it reaches
    (``(start, end, aggregate)`` in the store's order: by end, then start): its start, its end
    and the merged aggregate before the record is added. :meth:`SessionWindowAggregateProcessor.
    process` and the batch path's replay both call this."""
    agg = initializer()
    start = end = ts
    for s, e, stored in found:
        agg = merger(key, agg, stored)
        if s < start:
            start = s
        if e > end:
            end = e
    return start, end, agg


#: sentinel position: "not within this batch"
_NEVER = np.iinfo(np.int64).max
#: sequence number of a session's final put among one record's store changes
_LAST_SEQ = 1 << 40

Stored = tuple[int, int, Any, int]  # (end, start, agg, timestamp) of a stored session
#: a store change ``(position, seq, (end, start), old, new, timestamp)`` of one key
Change_ = tuple[int, int, tuple[int, int], Any, Any, int]
#: a session version ``(created, removed, end, start, key, agg)`` (positions; -1: before)
Version = tuple[int, int, int, int, Any, Any]


def _segmented_cummax(values: np.ndarray, groups: np.ndarray) -> np.ndarray | None:
    """Running maximum of ``values`` restarting at each new group (``groups`` nondecreasing
    from 0); ``None`` if the values span too wide a range for the int64 trick."""
    if not len(values):
        return values.copy()
    base = int(values.min())
    span = int(values.max()) - base + 1
    if span * (int(groups[-1]) + 1) >= 1 << 62:
        return None
    shift = groups * span - base
    return np.maximum.accumulate(values + shift) - shift


class SessionBatch:
    """One batch of a session aggregation, vectorised.

    Records with a null key or value go through :meth:`SessionWindowAggregateProcessor.process`.
    The others are grouped per key into *clusters*: their timestamps sorted and split where
    consecutive ones are more than the gap apart, each with the stored sessions it reaches
    (clusters that reach one stored session together form one group). Sessions of one cluster
    never reach another's, so clusters are independent. A cluster is *simple* when, taking its
    records in arrival order, every record merges with exactly the session the earlier ones made
    (the first one with every stored session it reaches), that session is still live, and no
    record is late: then the session after each record is the running min/max of timestamps,
    and the aggregates, store changes and closed sessions follow with array operations. Other
    groups are replayed record by record on a small list of their sessions, with the clocks
    (close time, expiry bound) the record-by-record path has at each record.

    Results are then put in record order: cached changes by the position of their last update
    (a change created and removed within the batch forwards nothing; with the store's
    changelog captured it still flushes a tombstone, as the record-by-record cache does),
    and ``on_window_close`` results by the record whose close time passes them, each session
    version being forwarded if it is stored then and not removed by that record.
    """

    def __init__(
        self,
        proc: SessionWindowAggregateProcessor,
        view: RecordBatch,
        observed: int,
        last_emit: int | None,
    ) -> None:
        self.proc = proc
        self.view = view
        self.store: InMemorySessionStore = proc.store
        self.gap = proc.windows.inactivity_gap_ms
        self.grace = proc.windows.grace_ms
        self.observed0 = observed
        self.last_emit = last_emit
        self.floor = -1 if last_emit is None else last_emit
        #: the store's changes go to its changelog (through its cache, flushed at commit)
        self.logged = bool(
            self.store.logging and self.store.caching and view.captures_changelog(self.store.name)
        )
        #: cached changes are computed and put into the store's cache: for forwarding on
        #: flush (emit on update with caching) and for the changelog
        self.replay = (not proc.emit_final and proc.caching) or self.logged
        self.keys = view.keys.uniques
        #: the batch's keys and the stored sessions' other keys, by code
        self.all_keys: list[Any] = list(self.keys)
        self.codes: dict[Any, int] = {key: code for code, key in enumerate(self.keys)}
        #: per key code: stored sessions removed, sessions to store
        self.removes: dict[int, list[tuple[int, int]]] = {}
        self.puts: dict[int, list[tuple[int, int, Any, int]]] = {}
        self.events: list[tuple[int, int, Any, Any, Any, int]] = []
        self.versions: list[Version] = []
        self.removed_at: dict[tuple[Any, int, int], int] = {}

    def run(self) -> int | None:
        proc, view, store = self.proc, self.view, self.store
        gap = self.gap
        n = len(view)
        ts = view.timestamps
        key_codes = view.keys.codes
        valid = (key_codes >= 0) & (view.values.codes >= 0)
        vpos = np.flatnonzero(valid)
        if not len(vpos):
            return None
        # clocks of the record-by-record path at each position
        obs_after = np.maximum.accumulate(np.maximum(np.where(valid, ts, -1), self.observed0))
        obs_before = np.empty_like(obs_after)
        obs_before[0] = self.observed0
        obs_before[1:] = obs_after[:-1]
        self.obs_after = obs_after
        self.close = close = obs_after - (self.grace + gap)
        self.bound = bound = obs_before - store.retention_ms
        self.n = n

        # clusters: per key, timestamps sorted and split where more than the gap apart
        vts, vcode = ts[vpos], key_codes[vpos]
        by_time = np.lexsort((vts, vcode))
        c1, t1 = vcode[by_time], vts[by_time]
        new = np.ones(len(vpos), dtype=bool)
        new[1:] = (c1[1:] != c1[:-1]) | (t1[1:] - t1[:-1] > gap)
        cid = np.cumsum(new) - 1
        n_clusters = int(cid[-1]) + 1
        cl_min = t1[new]
        cl_max = t1[np.r_[new[1:], True]]
        cl_code = c1[new]
        self._cl_code = cl_code
        cluster = np.empty(len(vpos), dtype=np.int64)
        cluster[by_time] = cid
        # records of each cluster in arrival order
        order = np.argsort(cluster, kind="stable")
        cl = cluster[order]
        pos = vpos[order]
        t = vts[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = cl[1:] != cl[:-1]
        first_idx = np.flatnonzero(first)
        last_idx = np.r_[first_idx[1:] - 1, len(order) - 1]

        # stored sessions each cluster reaches; one reaching several clusters joins them
        bad = np.zeros(n_clusters, dtype=bool)
        joined_to = np.arange(n_clusters)  # first cluster of each cluster's group
        reach: dict[int, list[Stored]] = {}
        keys = self.keys
        initial_bound = self.observed0 - store.retention_ms
        code_start = np.flatnonzero(np.r_[True, cl_code[1:] != cl_code[:-1]])
        code_end = np.r_[code_start[1:], n_clusters]
        for lo, hi in zip(code_start.tolist(), code_end.tolist()):
            for end, start, agg, stamp in store.raw_sessions(keys[int(cl_code[lo])]):
                if end <= initial_bound:
                    continue  # expired: no record finds it again
                a = lo + int(np.searchsorted(cl_max[lo:hi], start - gap, "left"))
                b = lo + int(np.searchsorted(cl_min[lo:hi], end + gap, "right"))
                if b - a >= 1:
                    if b - a > 1:
                        bad[a:b] = True
                        joined_to[a:b] = np.minimum(joined_to[a:b], joined_to[a])
                    reach.setdefault(a, []).append((end, start, agg, stamp))
        smin, smax = t.copy(), t.copy()
        for c, found in reach.items():
            if bad[c]:
                continue
            i = int(first_idx[c])
            t0, p0 = int(t[i]), int(pos[i])
            if any(e < t0 - gap or s > t0 + gap or e <= bound[p0] for e, s, _, _ in found):
                bad[c] = True
                continue
            smin[i] = min(t0, min(f[1] for f in found))
            smax[i] = max(t0, max(f[0] for f in found))
        wmax = _segmented_cummax(smax, cl)
        neg_min = _segmented_cummax(-smin, cl)
        if wmax is None or neg_min is None:
            return None
        wmin = -neg_min
        # every later record must merge with the live session before it; none late
        prev_min = np.r_[0, wmin[:-1]]
        prev_max = np.r_[0, wmax[:-1]]
        broken = ~first & ((t < prev_min - gap) | (t > prev_max + gap) | (prev_max <= bound[pos]))
        broken |= wmax < close[pos]
        bad[cl[broken]] = True
        good = ~bad[cl]

        snapshot = self._snapshot() if proc.emit_final and self._advances() else None
        # single records (null key or value) the record-by-record way
        exact = np.ones(n, dtype=bool)
        exact[vpos] = False
        self._run_exact(np.flatnonzero(exact), obs_before)
        # groups of clusters that are not simple, replayed record by record
        for g in np.unique(joined_to[bad]).tolist():
            hi = g + 1
            while hi < n_clusters and joined_to[hi] == g:
                hi += 1
            members = np.arange(int(first_idx[g]), int(last_idx[hi - 1]) + 1)
            members = members[np.argsort(pos[members], kind="stable")]
            found = [f for c in range(g, hi) for f in reach.get(c, ())]
            self._replay_group(int(cl_code[g]), pos[members], t[members], found)
        # simple clusters
        good_clusters = np.flatnonzero(~bad)
        aggs = self._aggregates(good, first, cl, pos, reach, cl_code)
        g_first = first_idx[good_clusters]
        g_last = last_idx[good_clusters]
        self._simple_store_changes(good_clusters, g_first, g_last, pos, wmin, wmax, aggs, reach,
                                   cl_code)

        final_observed = int(obs_after[-1])
        proc.state[OBSERVED] = final_observed
        store.advance_observed(final_observed)
        self._write(np.unique(cl_code).tolist())
        if proc.emit_final and snapshot is not None:
            self._emit(snapshot, good, cl, pos, wmin, wmax, aggs, cl_code)
            proc.state[LAST_EMIT] = int(close[-1])
        if self.replay:
            self.events.sort(key=lambda e: (e[0], e[1]))
            changed = store._changed
            for _, _, store_key, old, new_value, stamp in self.events:
                changed(store_key, old, new_value, stamp)
        proc._pending = None
        return int(good.sum())

    # -- clocks and single records -----------------------------------------------------------
    def _advances(self) -> bool:
        """Whether some record moves the close time past the last emitted one."""
        return self.last_emit is None or int(self.close[-1]) > self.last_emit

    def _snapshot(self) -> list[tuple[int, int, Any, Any]]:
        """``(end, start, key, agg)`` of the stored sessions some record may close."""
        top = int(self.close[-1])
        return [
            (kv.key.window.end, kv.key.window.start, kv.key.key, kv.value)
            for kv in self.store.all()
            if self.floor <= kv.key.window.end < top
        ]

    def _run_exact(self, positions: np.ndarray, obs_before: np.ndarray) -> None:
        proc, store, view = self.proc, self.store, self.view
        proc._in_batch = True
        store.deferred_changes = []
        try:
            for p in positions.tolist():
                before = int(obs_before[p])
                proc.state[OBSERVED] = before
                store.advance_observed(before)
                store.deferred_position = p
                view.process_exact(p, proc.process)
            if store.deferred_changes:  # records with a null key or value change nothing
                raise AssertionError("single records changed the store")
        finally:
            store.deferred_changes = None
            proc._in_batch = False

    # -- groups replayed record by record -----------------------------------------------------
    def _replay_group(
        self, code: int, positions: np.ndarray, stamps: np.ndarray, reached: list[Stored]
    ) -> None:
        """The record-by-record algorithm of :meth:`SessionWindowAggregateProcessor.process`
        on the sessions of one group, with the clocks of each record's position."""
        proc, view = self.proc, self.view
        key = self.keys[code]
        gap = self.gap
        init, aggregator, merger = proc.initializer, proc.aggregator, proc.merger
        value_of = view.values.value
        close, bound = self.close, self.bound
        # (end, start) -> [agg, created position (-1: stored before), timestamp]
        sessions: dict[tuple[int, int], list[Any]] = {
            (end, start): [agg, -1, stamp] for end, start, agg, stamp in reached
        }
        changes: list[Change_] = []
        seq = 0
        for p, ts, live_after, closes in zip(
            positions.tolist(), stamps.tolist(), bound[positions].tolist(),
            close[positions].tolist(),
        ):
            lowest_end = max(ts - gap, live_after + 1)
            highest_start = ts + gap
            found = sorted(w for w in sessions if w[0] >= lowest_end and w[1] <= highest_start)
            value = value_of(p)
            start, end, agg = merged_session(
                key, ts, [(w[1], w[0], sessions[w][0]) for w in found], init, merger
            )
            if end < closes:
                self._drop_late(p, key, value, ts, Window(start, end))
                continue
            if start != ts or end != ts:
                for w in found:
                    old = sessions.pop(w)
                    self._ended(key, w, old, p)
                    changes.append((p, seq, w, old[0], None, w[0]))
                    seq += 1
            agg = aggregator(key, value, agg)
            window = (end, start)
            replaced = sessions.get(window)
            if replaced is not None:
                self._ended(key, window, replaced, p)
            sessions[window] = [agg, p, end]
            changes.append((p, seq, window, None if replaced is None else replaced[0], agg, end))
            seq += 1
        # the store: stored sessions of the group removed, the group's sessions put back
        self.removes.setdefault(code, []).extend((end, start) for end, start, _, _ in reached)
        self.puts.setdefault(code, []).extend(
            (end, start, state[0], state[2]) for (end, start), state in sessions.items()
        )
        if proc.emit_final:
            for (end, start), (agg, created, _) in sessions.items():
                if created >= 0:
                    self.versions.append((created, _NEVER, end, start, key, agg))
        if self.replay:
            self._collapse(key, changes)

    def _ended(self, key: Any, window: tuple[int, int], state: list[Any], p: int) -> None:
        end, start = window
        if state[1] < 0:
            self.removed_at.setdefault((key, start, end), p)
        elif self.proc.emit_final:
            self.versions.append((state[1], p, end, start, key, state[0]))

    def _collapse(self, key: Any, changes: list[Change_]) -> None:
        """One cached change per store key: the first old value, the last new value, at the
        position of the last update; changes flushing nothing are left out."""
        last: dict[tuple[int, int], list[Any]] = {}
        for p, seq, window, old, new_value, stamp in changes:
            entry = last.get(window)
            if entry is None:
                last[window] = [p, seq, old, new_value, stamp]
            else:
                entry[0], entry[1], entry[3], entry[4] = p, seq, new_value, stamp
        for (end, start), (p, seq, old, new_value, stamp) in last.items():
            # a session made and removed within the batch flushes a tombstone to the
            # changelog only (nothing is forwarded)
            if old is not None or new_value is not None or self.logged:
                self.events.append(
                    (p, seq, Windowed(key, Window(start, end)), old, new_value, stamp)
                )

    def _drop_late(self, p: int, key: Any, value: Any, ts: int, window: Window) -> None:
        record = Record(key, value, ts)
        close, observed = int(self.close[p]), int(self.obs_after[p])
        ctx = self.proc.context
        self.view.run_at(p, lambda: drop_expired(ctx, record, window, close, observed))

    # -- simple clusters ---------------------------------------------------------------------
    def _aggregates(
        self,
        good: np.ndarray,
        first: np.ndarray,
        cl: np.ndarray,
        pos: np.ndarray,
        reach: dict[int, list[Stored]],
        cl_code: np.ndarray,
    ) -> Any:
        """The aggregate after each record of the simple clusters (cluster order): an object
        array of ints for ``count``, else a list."""
        proc, keys = self.proc, self.keys
        init, aggregator, merger = proc.initializer, proc.aggregator, proc.merger
        if isinstance(proc.aggregation, Count):
            idx = np.arange(len(cl))
            first_of = np.maximum.accumulate(np.where(first, idx, 0))
            base = np.zeros(int(cl[-1]) + 1, dtype=object)
            plain = True
            for c, found in reach.items():
                agg = init()
                for _, _, stored, _ in found:
                    agg = merger(keys[int(cl_code[c])], agg, stored)
                base[c] = agg
                plain = plain and type(agg) is int
            if plain:
                return base[cl] + (idx - first_of + 1)
        value_of = self.view.values.value
        out: list[Any] = [None] * len(cl)
        agg = None
        for i in np.flatnonzero(good).tolist():
            c = int(cl[i])
            key = keys[int(cl_code[c])]
            value = value_of(int(pos[i]))
            if first[i]:
                agg = init()
                for _, _, stored, _ in reach.get(c, ()):
                    agg = merger(key, agg, stored)
            else:
                agg = merger(key, init(), agg)
            out[i] = aggregator(key, value, agg)
            agg = out[i]
        return out

    def _simple_store_changes(
        self,
        clusters: np.ndarray,
        g_first: np.ndarray,
        g_last: np.ndarray,
        pos: np.ndarray,
        wmin: np.ndarray,
        wmax: np.ndarray,
        aggs: Any,
        reach: dict[int, list[Stored]],
        cl_code: np.ndarray,
    ) -> None:
        """Per simple cluster: the stored sessions it reaches are removed (by its first record)
        and its final session put (by its last record); cached changes of both."""
        keys, removes, puts = self.keys, self.removes, self.puts
        live_from = (
            self.store.min_live_segment()  # before the final clock: a lower bound is enough
            * self.store.segment_interval_ms
        )
        ends = wmax[g_last]
        keep = (ends >= live_from) | np.isin(clusters, list(reach))
        if self.replay:
            keep[:] = True
        kept, firsts, lasts = clusters[keep], g_first[keep], g_last[keep]
        finals = [aggs[i] for i in lasts.tolist()] if isinstance(aggs, list) else (
            aggs[lasts].tolist())
        for c, f, last, code, end, start, agg in zip(
            kept.tolist(), firsts.tolist(), lasts.tolist(), cl_code[kept].tolist(),
            wmax[lasts].tolist(), wmin[lasts].tolist(), finals,
        ):
            put = puts.get(code)
            if put is None:
                puts[code] = [(end, start, agg, end)]
            else:
                put.append((end, start, agg, end))
            found = reach.get(c)
            if found:
                p0 = int(pos[f])
                key = keys[code]
                removes.setdefault(code, []).extend((fe, fs) for fe, fs, _, _ in found)
                for fe, fs, _, _ in found:
                    self.removed_at[(key, fs, fe)] = p0
            if self.replay:
                self._simple_events(c, f, last, pos, wmin, wmax, agg, found or ())

    def _simple_events(
        self,
        c: int,
        f: int,
        last: int,
        pos: np.ndarray,
        wmin: np.ndarray,
        wmax: np.ndarray,
        agg: Any,
        found: Any,
    ) -> None:
        """Cached changes of one simple cluster: a tombstone per reached session (unless the
        cluster's session keeps its window for a while) and the final session."""
        key = self.keys[self._code_of(c)]
        end, start = int(wmax[last]), int(wmin[last])
        final = Windowed(key, Window(start, end))
        p0, p_last = int(pos[f]), int(pos[last])
        events = self.events
        if self.logged:
            self._intermediate_tombstones(key, f, last, pos, wmin, wmax, found)
        for seq, (fe, fs, fagg, _) in enumerate(found):
            if len(found) == 1 and wmin[f] == fs and wmax[f] == fe:
                # the first record lands inside the stored session: same window again
                same = (wmin[f : last + 1] == fs) & (wmax[f : last + 1] == fe)
                changed = np.flatnonzero(~same)
                if not len(changed):
                    events.append((p_last, _LAST_SEQ, final, fagg, agg, end))
                    return
                events.append((int(pos[f + int(changed[0])]), 0,
                               Windowed(key, Window(fs, fe)), fagg, None, fe))
            else:
                events.append((p0, seq, Windowed(key, Window(fs, fe)), fagg, None, fe))
        events.append((p_last, _LAST_SEQ, final, None, agg, end))

    def _intermediate_tombstones(
        self,
        key: Any,
        f: int,
        last: int,
        pos: np.ndarray,
        wmin: np.ndarray,
        wmax: np.ndarray,
        found: Any,
    ) -> None:
        """The changelog tombstones of the sessions a simple cluster made and replaced within
        the batch: each window but the last, removed by the first record that grows it (a
        stored session among them has its own change, with its old value)."""
        lo, hi = wmin[f : last + 1], wmax[f : last + 1]
        grown = np.flatnonzero((lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1]))
        if not len(grown):
            return
        stored = {(fs, fe) for fe, fs, _, _ in found}
        events = self.events
        for k in grown.tolist():
            start, end = int(lo[k]), int(hi[k])
            if (start, end) not in stored:
                events.append((int(pos[f + k + 1]), 0, Windowed(key, Window(start, end)),
                               None, None, end))

    def _code_of(self, c: int) -> int:
        return int(self._cl_code[c])

    # -- results -----------------------------------------------------------------------------
    def _write(self, codes: list[int]) -> None:
        """Every key of the batch: its removed sessions deleted, its sessions stored."""
        store, keys = self.store, self.keys
        for code in codes:
            store.apply_raw(keys[code], self.removes.get(code, ()), self.puts.get(code, ()))

    def _emit(
        self,
        snapshot: list[tuple[int, int, Any, Any]],
        good: np.ndarray,
        cl: np.ndarray,
        pos: np.ndarray,
        wmin: np.ndarray,
        wmax: np.ndarray,
        aggs: Any,
        cl_code: np.ndarray,
    ) -> None:
        """Forward each session version at the record that closes it, in the order of
        :meth:`SessionWindowAggregateProcessor._closed_sessions`."""
        versions = self.versions
        for end, start, key, agg in snapshot:
            removed = self.removed_at.get((key, start, end), _NEVER)
            versions.append((-1, removed, end, start, key, agg))
        # (at, end, start, key code, aggregate) of each forwarded version, as columns
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]]] = []
        if versions:
            created, removed_at, ends, starts = (
                np.array([v[f] for v in versions], dtype=np.int64) for f in range(4)
            )
            hit = np.flatnonzero(self._emitted(created, removed_at, ends))
            parts.append((
                np.searchsorted(self.close, ends[hit], "right"),
                ends[hit],
                starts[hit],
                np.array([self._code(versions[k][4]) for k in hit.tolist()], dtype=np.int64),
                [versions[k][5] for k in hit.tolist()],
            ))
        # simple clusters: one version per record, ended by the cluster's next record
        idx = np.flatnonzero(good)
        if len(idx):
            nxt = np.full(len(cl), _NEVER, dtype=np.int64)
            same = cl[1:] == cl[:-1]
            nxt[:-1][same] = pos[1:][same]
            hit = idx[self._emitted(pos[idx], nxt[idx], wmax[idx])]
            parts.append((
                np.searchsorted(self.close, wmax[hit], "right"),
                wmax[hit],
                wmin[hit],
                cl_code[cl[hit]],
                np.asarray(aggs, dtype=object)[hit].tolist(),
            ))
        if not parts:
            return
        at, ends, starts, codes = (np.concatenate([p[f] for p in parts]) for f in range(4))
        aggregates = [a for p in parts for a in p[4]]
        # as _closed_sessions forwards them: by record, then (end, start, key)
        keys = self.all_keys
        try:
            ranks = np.empty(len(keys), dtype=np.int64)
            ranks[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
            order = np.lexsort((ranks[codes], starts, ends, at))
        except TypeError:  # keys that do not all compare: compare them only on ties
            order = np.array(sorted(range(len(at)), key=lambda i: (
                at[i], ends[i], starts[i], keys[codes[i]])), dtype=np.int64)
        emitted = ends[order]
        columns = RecordColumns(
            WindowedKeys(keys, codes[order], starts[order], emitted),
            NewValues([aggregates[k] for k in order.tolist()]),
            emitted,
        )
        self.view.forward_columns(at[order], columns)

    def _code(self, key: Any) -> int:
        """The code of ``key`` in :attr:`all_keys` (the batch's keys, then stored ones)."""
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.all_keys)
            self.all_keys.append(key)
        return code

    def _emitted(self, created: np.ndarray, removed: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Which versions are forwarded: the first record whose close time passes the end
        comes after the version's creation, before its removal, within the batch, while the
        session is still live."""
        e = np.searchsorted(self.close, ends, "right")
        inside = e < self.n
        live = np.zeros(len(e), dtype=bool)
        live[inside] = ends[inside] > self.bound[e[inside]]
        return inside & live & (e > created) & (e < removed) & (ends >= self.floor)
