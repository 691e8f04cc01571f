"""The vectorised path of the session aggregation: a task's whole batch at once, with exactly
the store contents, forwarded records, counters and persisted state of record-by-record
processing (see :class:`SessionBatch`)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from operator import itemgetter
from typing import Any

import numpy as np

from kspark.dsl.internals.aggregations import Count
from kspark.dsl.internals.windowing.common import (
    LAST_EMIT,
    OBSERVED,
    drop_expired,
)
from kspark.dsl.internals.windowing.session_emission import (
    NEVER,
    Change_,
    SessionEmission,
    Stored,
    segmented_cummax,
)
from kspark.dsl.internals.windowing.session_merge import merged_session
from kspark.records import Record
from kspark.windows import Window, Windowed


class DeletedSession(Exception):
    """A replayed group's aggregator returned ``None`` (its session is deleted, which the
    replay does not model): the task runs the batch again record by record."""


class SessionBatch(SessionEmission):
    """One batch of a session aggregation, vectorised.

    Records with a null key go through :meth:`SessionWindowAggregateProcessor.process` (a batch
    with a null value is processed record by record).
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

    def run(self) -> int | None:
        proc, view, store = self.proc, self.view, self.store
        gap = self.gap
        n = len(view)
        ts = view.timestamps
        key_codes = view.keys.codes
        self.buckets = store.buckets_of(self.keys)
        if store.memory_limited:
            key_codes = self._codes_by_bucket(key_codes)
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
        # a key's clusters are apart and in time order: both bounds are sorted per key
        maxima, minima, codes = cl_max.tolist(), cl_min.tolist(), cl_code.tolist()
        buckets, raw_sessions = self.buckets, store.raw_sessions
        # the keys with stored sessions, found at once (with limited memory each bucket is
        # loaded once, by the passes below)
        stored = None if store.memory_limited else store.stored_keys(keys, buckets)
        for lo, hi in zip(code_start.tolist(), code_end.tolist()):
            code = codes[lo]
            if stored is not None and code not in stored:
                continue
            for end, start, agg, stamp in raw_sessions(keys[code], buckets[code]):
                if end <= initial_bound:
                    continue  # expired: no record finds it again
                a = bisect_left(maxima, start - gap, lo, hi)
                b = bisect_right(minima, end + gap, lo, hi)
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
        wmax = segmented_cummax(smax, cl)
        neg_min = segmented_cummax(-smin, cl)
        if wmax is None or neg_min is None:
            return None
        wmin = -neg_min
        # every later record must merge with the live session before it, or fall inside it
        # after it closed or expired: then it is dropped as late and changes nothing
        prev_min = np.r_[0, wmin[:-1]]
        prev_max = np.r_[0, wmax[:-1]]
        at_close = close[pos]
        live = prev_max > bound[pos]
        dropped = ~first & (t >= prev_min) & (t <= prev_max) & np.where(
            live, prev_max < at_close, t < at_close)
        broken = ~first & ((t < prev_min - gap) | (t > prev_max + gap) | ~live)
        broken |= wmax < at_close
        bad[cl[broken & ~dropped]] = True
        good = ~bad[cl]
        dropped &= good
        kept = good & ~dropped
        # before anything is done: an aggregator returning None deletes its session, which
        # the simple clusters do not model (the batch goes record by record)
        aggs = self._aggregates(kept, first, cl, pos, reach, cl_code)
        if aggs is None:
            return None

        snapshot = self._snapshot() if proc.emit_final and self._advances() else None
        # single records (null key) the record-by-record way
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
        self._drop_inside(np.flatnonzero(dropped), pos, t, live, wmin, wmax, cl_code[cl])
        good_clusters = np.flatnonzero(~bad)
        g_first = first_idx[good_clusters]
        # a cluster's session is last changed by its last record not dropped (never its first)
        g_last = np.maximum.reduceat(np.where(kept, np.arange(len(cl)), -1), first_idx)[
            good_clusters]
        self._simple_store_changes(good_clusters, g_first, g_last, pos, wmin, wmax, aggs, reach,
                                   cl_code)

        final_observed = int(obs_after[-1])
        proc.state[OBSERVED] = final_observed
        store.advance_observed(final_observed)
        self._write(np.unique(cl_code).tolist())
        if proc.emit_final and snapshot is not None:
            self._emit(snapshot, kept, cl, pos, wmin, wmax, aggs, cl_code)
            proc.state[LAST_EMIT] = int(close[-1])
        if self.replay:
            self.events.sort(key=itemgetter(0, 1))
            store._changed_all(e[2:] for e in self.events)
        proc.pending_closes = None
        return int(good.sum())

    def _codes_by_bucket(self, codes: np.ndarray) -> np.ndarray:
        """``codes`` renumbered so that the keys of one store bucket have consecutive codes:
        clusters are in code order, so the store's reads and writes then go through its
        buckets one after another (each loaded once per pass with limited memory)."""
        if not len(self.keys):
            return codes
        order = np.argsort(np.array(self.buckets, dtype=np.int64), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        self.keys = [self.keys[i] for i in order.tolist()]
        self.buckets = [self.buckets[i] for i in order.tolist()]
        self.all_keys = list(self.keys)
        self.codes = {key: code for code, key in enumerate(self.keys)}
        return np.where(codes >= 0, rank[np.maximum(codes, 0)], codes)

    # -- clocks and single records -----------------------------------------------------------
    def _advances(self) -> bool:
        """Whether some record moves the close time past the last emitted one."""
        return self.last_emit is None or int(self.close[-1]) > self.last_emit

    def _snapshot(self) -> list[tuple[int, int, Any, Any]]:
        """``(end, start, key, agg)`` of the stored sessions some record may close."""
        top = int(self.close[-1])
        return self.store.raw_ending(self.floor, top)

    def _run_exact(self, positions: np.ndarray, obs_before: np.ndarray) -> None:
        proc, store, view = self.proc, self.store, self.view
        proc.in_batch = True
        try:
            for p in positions.tolist():  # records with a null key: they change no session
                before = int(obs_before[p])
                proc.state[OBSERVED] = before
                store.advance_observed(before)
                view.process_exact(p, proc.process)
        finally:
            proc.in_batch = False

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
                key, ts, [(w[0], w[1], sessions[w][0]) for w in found], init, merger
            )
            if end < closes:
                self._drop_late(p, key, value, ts, Window(start, end))
                continue
            if start != ts or end != ts:
                for w in found:
                    old = sessions.pop(w)
                    self._ended(key, w, old, p)
                    changes.append((p, seq, w, old[0], None, ts))
                    seq += 1
            agg = aggregator(key, value, agg)
            if agg is None:  # a deleted session: not modelled here (the batch runs again)
                raise DeletedSession("an aggregator returned None: its session is deleted")
            window = (end, start)
            replaced = sessions.get(window)
            if replaced is not None:
                self._ended(key, window, replaced, p)
            sessions[window] = [agg, p, ts]
            changes.append((p, seq, window, None if replaced is None else replaced[0], agg, ts))
            seq += 1
        # the store: stored sessions of the group removed, the group's sessions put back
        self.removes.setdefault(code, []).extend((end, start) for end, start, _, _ in reached)
        self.puts.setdefault(code, []).extend(
            (end, start, state[0], state[2]) for (end, start), state in sessions.items()
        )
        if proc.emit_final:
            for (end, start), (agg, created, _) in sessions.items():
                if created >= 0:
                    self.versions.append((created, NEVER, end, start, key, agg))
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

    def _drop_inside(
        self,
        dropped: np.ndarray,
        pos: np.ndarray,
        t: np.ndarray,
        live: np.ndarray,
        wmin: np.ndarray,
        wmax: np.ndarray,
        codes: np.ndarray,
    ) -> None:
        """Drop the late records of simple clusters (indices ``dropped`` of the cluster-ordered
        columns): each falls inside its cluster's session, which had closed (merged window: the
        session's) or expired (its own window) when it came."""
        keys, value_of = self.keys, self.view.values.value
        for p, ts, merged, start, end, code in zip(
            pos[dropped].tolist(), t[dropped].tolist(),
            live[dropped].tolist(), wmin[dropped].tolist(), wmax[dropped].tolist(),
            codes[dropped].tolist(),
        ):
            window = Window(start, end) if merged else Window(ts, ts)
            self._drop_late(p, keys[code], value_of(p), ts, window)

    def _drop_late(self, p: int, key: Any, value: Any, ts: int, window: Window) -> None:
        record = Record(key, value, ts)
        close, observed = int(self.close[p]), int(self.obs_after[p])
        ctx = self.proc.context
        self.view.run_at(p, lambda: drop_expired(ctx, record, window, close, observed))

    # -- simple clusters ---------------------------------------------------------------------
    def _aggregates(
        self,
        kept: np.ndarray,
        first: np.ndarray,
        cl: np.ndarray,
        pos: np.ndarray,
        reach: dict[int, list[Stored]],
        cl_code: np.ndarray,
    ) -> Any:
        """The aggregate after each record of the simple clusters (cluster order): an object
        array of ints for ``count``, else a list; ``None`` if the aggregator returns ``None``
        (a deleted session)."""
        proc, keys = self.proc, self.keys
        init, aggregator, merger = proc.initializer, proc.aggregator, proc.merger
        if isinstance(proc.aggregation, Count):
            idx = np.arange(len(cl))
            first_of = np.maximum.accumulate(np.where(first, idx, 0))
            counted = np.cumsum(kept)  # records aggregated so far (a cluster's first always is)
            base = np.zeros(int(cl[-1]) + 1, dtype=object)
            plain = True
            for c, found in reach.items():
                agg = init()
                for _, _, stored, _ in found:
                    agg = merger(keys[int(cl_code[c])], agg, stored)
                base[c] = agg
                plain = plain and type(agg) is int
            if plain:
                return base[cl] + (counted - counted[first_of] + 1)
        value_of = self.view.values.value
        out: list[Any] = [None] * len(cl)
        agg = None
        for i in np.flatnonzero(kept).tolist():
            c = int(cl[i])
            key = keys[int(cl_code[c])]
            value = value_of(int(pos[i]))
            if first[i]:
                agg = init()
                for _, _, stored, _ in reach.get(c, ()):
                    agg = merger(key, agg, stored)
            else:
                agg = merger(key, init(), agg)
            agg = out[i] = aggregator(key, value, agg)
            if agg is None:
                return None
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
        # a session is stored (and logged) with the timestamp of the record that put it last
        stamps = self.stamps[pos[lasts]].tolist()
        replay = self.replay
        # the per-cluster work below reads single elements: Python lists, not numpy scalars
        pos_l, wmin_l, wmax_l = (pos.tolist(), wmin.tolist(), wmax.tolist()) if replay else (
            [], [], [])
        removed_at = self.removed_at
        for c, f, last, code, end, start, agg, stamp in zip(
            kept.tolist(), firsts.tolist(), lasts.tolist(), cl_code[kept].tolist(),
            wmax[lasts].tolist(), wmin[lasts].tolist(), finals, stamps,
        ):
            put = puts.get(code)
            if put is None:
                puts[code] = [(end, start, agg, stamp)]
            else:
                put.append((end, start, agg, stamp))
            found = reach.get(c)
            if found:
                p0 = int(pos[f])
                key = keys[code]
                removes.setdefault(code, []).extend((fe, fs) for fe, fs, _, _ in found)
                for fe, fs, _, _ in found:
                    removed_at[(key, fs, fe)] = p0
            if replay:
                self._simple_events(keys[code], f, last, pos_l, wmin_l, wmax_l, agg,
                                    found or ())
