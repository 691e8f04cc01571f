"""The state of one vectorised session batch and what it forwards: which session versions
are emitted (on window update or on window close), in the order record-by-record processing
would forward them. :class:`.session_batch.SessionBatch` runs
the batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from kspark.dsl.internals.aggregations import Aggregation
from kspark.dsl.internals.windowing.pending_closes import PendingCloses
from kspark.processor.api import ProcessorContext
from kspark.processor.batch import RecordBatch
from kspark.record_columns import NewValues, RecordColumns, WindowedKeys
from kspark.records import Record
from kspark.state.session import InMemorySessionStore
from kspark.windows import SessionWindows, Window, Windowed


class SessionOperator(Protocol):
    """What the batch path needs of the session aggregation's processor
    (:class:`~kspark.dsl.internals.windowing.session.SessionWindowAggregateProcessor`)."""

    store: InMemorySessionStore
    windows: SessionWindows
    aggregation: Aggregation
    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    merger: Callable[[Any, Any, Any], Any]
    emit_final: bool
    caching: bool
    context: ProcessorContext
    state: dict[str, Any]
    #: set while the batch path runs single records through :meth:`process`
    in_batch: bool
    #: the sessions awaiting emission on window close (loaded on first use)
    pending_closes: PendingCloses | None

    def process(self, record: Record) -> None: ...


#: sentinel position: "not within this batch"
NEVER = np.iinfo(np.int64).max
#: sequence number of a session's final put among one record's store changes
LAST_SEQ = 1 << 40

Stored = tuple[int, int, Any, int]  # (end, start, agg, timestamp) of a stored session
#: a store change ``(position, seq, (end, start), old, new, timestamp)`` of one key
Change_ = tuple[int, int, tuple[int, int], Any, Any, int]
#: a session version ``(created, removed, end, start, key, agg)`` (positions; -1: before)
Version = tuple[int, int, int, int, Any, Any]


def segmented_cummax(values: np.ndarray, groups: np.ndarray) -> np.ndarray | None:
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


class SessionEmission:
    """A session batch's state (set up here, filled by ``SessionBatch.run``) and its emission."""

    #: per record position: the close time, and the end below which stored sessions expired
    close: np.ndarray
    bound: np.ndarray
    #: number of records in the batch
    n: int

    def __init__(
        self,
        proc: SessionOperator,
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
        #: the store bucket of each key, by code (set by the batch's run)
        self.buckets: list[int] = []
        #: each position's record timestamp: a store change is logged with the timestamp of
        #: the record that makes it, as Kafka Streams' session store logs
        self.stamps = np.asarray(view.timestamps, dtype=np.int64)
        self.stamp_list: list[int] = self.stamps.tolist()
        #: the batch's keys and the stored sessions' other keys, by code
        self.all_keys: list[Any] = list(self.keys)
        self.codes: dict[Any, int] = {key: code for code, key in enumerate(self.keys)}
        #: per key code: stored sessions removed, sessions to store
        self.removes: dict[int, list[tuple[int, int]]] = {}
        self.puts: dict[int, list[tuple[int, int, Any, int]]] = {}
        self.events: list[tuple[int, int, Any, Any, Any, int]] = []
        self.versions: list[Version] = []
        self.removed_at: dict[tuple[Any, int, int], int] = {}

    def _simple_events(
        self,
        key: Any,
        f: int,
        last: int,
        pos: list[int],
        wmin: list[int],
        wmax: list[int],
        agg: Any,
        found: Any,
    ) -> None:
        """Cached changes of one simple cluster (its records at ``f`` to ``last`` of the
        cluster-ordered ``pos``, ``wmin`` and ``wmax``): a tombstone per reached session
        (unless the cluster's session keeps its window for a while) and the final session."""
        end, start = wmax[last], wmin[last]
        final = Windowed(key, Window(start, end))
        p0, p_last = pos[f], pos[last]
        stamps = self.stamp_list
        events = self.events
        if self.logged and last > f:
            self._intermediate_tombstones(key, f, last, pos, wmin, wmax, found)
        for seq, (fe, fs, fagg, _) in enumerate(found):
            if len(found) == 1 and wmin[f] == fs and wmax[f] == fe:
                # the first record lands inside the stored session: same window again
                changed = next((k for k in range(f + 1, last + 1)
                                if wmin[k] != fs or wmax[k] != fe), None)
                if changed is None:
                    events.append((p_last, LAST_SEQ, final, fagg, agg, stamps[p_last]))
                    return
                at = pos[changed]
                events.append((at, 0, Windowed(key, Window(fs, fe)), fagg, None, stamps[at]))
            else:
                events.append((p0, seq, Windowed(key, Window(fs, fe)), fagg, None, stamps[p0]))
        events.append((p_last, LAST_SEQ, final, None, agg, stamps[p_last]))

    def _intermediate_tombstones(
        self,
        key: Any,
        f: int,
        last: int,
        pos: list[int],
        wmin: list[int],
        wmax: list[int],
        found: Any,
    ) -> None:
        """The changelog tombstones of the sessions a simple cluster made and replaced within
        the batch: each window but the last, removed by the first record that grows it (a
        stored session among them has its own change, with its old value)."""
        stored = {(fs, fe) for fe, fs, _, _ in found}
        events, stamps = self.events, self.stamp_list
        for k in range(f, last):
            start, end = wmin[k], wmax[k]
            if (wmin[k + 1] != start or wmax[k + 1] != end) and (start, end) not in stored:
                at = pos[k + 1]
                events.append((at, 0, Windowed(key, Window(start, end)), None, None, stamps[at]))

    # -- results -----------------------------------------------------------------------------
    def _write(self, codes: list[int]) -> None:
        """Every key of the batch: its removed sessions deleted, its sessions stored."""
        keys, buckets, removes, puts = self.keys, self.buckets, self.removes, self.puts
        self.store.apply_raw(
            (keys[code], buckets[code], removes.get(code, ()), puts.get(code, ()))
            for code in codes
        )

    def _emit(
        self,
        snapshot: list[tuple[int, int, Any, Any]],
        kept: np.ndarray,
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
            removed = self.removed_at.get((key, start, end), NEVER)
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
        # simple clusters: one version per record aggregated, ended by the cluster's next one
        idx = np.flatnonzero(kept)
        if len(idx):
            nxt = np.full(len(cl), NEVER, dtype=np.int64)
            same = cl[idx[1:]] == cl[idx[:-1]]
            nxt[idx[:-1][same]] = pos[idx[1:][same]]
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
        order = _by_key_on_ties(np.lexsort((starts, ends, at)), (at, ends, starts), codes, keys)
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


def _by_key_on_ties(order: np.ndarray, columns: tuple[np.ndarray, ...], codes: np.ndarray,
                    keys: list[Any]) -> np.ndarray:
    """``order`` (sorted by ``columns``) with each run of equal ``columns`` values sorted by
    key (``keys[codes[i]]``): the keys are compared only where the other columns tie, so keys
    that do not compare with each other fail only if they tie."""
    if len(order) < 2:
        return order
    tie = np.ones(len(order) - 1, dtype=bool)
    for column in columns:
        ordered = column[order]
        tie &= ordered[1:] == ordered[:-1]
    if not tie.any():
        return order
    order = order.copy()
    starts = np.flatnonzero(tie & ~np.concatenate(([False], tie[:-1])))
    ends = np.flatnonzero(tie & ~np.concatenate((tie[1:], [False]))) + 2
    for a, b in zip(starts.tolist(), ends.tolist()):
        run = order[a:b].tolist()
        order[a:b] = sorted(run, key=lambda i: keys[codes[i]])
    return order
