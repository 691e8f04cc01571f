"""Reference models of the stores, written from docs/semantics.md §6 and the store brief, not
from the store code: plain dicts, a list sort per query, expiry computed from the spec's rules."""

from __future__ import annotations

from typing import Any

from kspark.records import KeyValue
from kspark.state.internals.packed import PackedBucket
from kspark.windows import Window, Windowed


class Recorder:
    """A flush listener that records ``(store_key, new, old, timestamp)``."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, Any, Any, int]] = []

    def __call__(self, key: Any, new: Any, old: Any, timestamp: int) -> None:
        self.events.append((key, new, old, timestamp))

    def take(self) -> list[tuple[Any, Any, Any, int]]:
        out, self.events = self.events, []
        return out


def seg(ts: int, interval: int) -> int:
    return ts // interval


class SegmentedModel:
    """Observed stream time, the drop rule and the visibility rule of a segmented store."""

    def __init__(self, retention: int, interval: int) -> None:
        self.retention = retention
        self.interval = interval
        self.observed = -1
        self.dropped = 0

    def observe(self, ts: int) -> None:
        self.observed = max(self.observed, ts)

    def oldest_live_segment(self) -> int:
        return seg(self.observed - self.retention, self.interval)

    def segment_expired(self, ts: int) -> bool:
        """After observing ``ts``: the put is not stored (spec: segment older than
        ``segment_id(stream_time - retention)``)."""
        return seg(ts, self.interval) < self.oldest_live_segment()

    def visible(self, ts: int) -> bool:
        """Spec: expired once ``ts <= stream_time - retention``."""
        return not ts <= self.observed - self.retention


class KeyValueModel:
    def __init__(self) -> None:
        self.data: dict[Any, tuple[Any, int]] = {}

    def put(self, k: Any, v: Any, ts: int) -> Any:
        old = self.data.pop(k, (None, 0))[0]
        if v is not None:
            self.data[k] = (v, ts)
        return old

    def get(self, k: Any) -> Any:
        return self.data.get(k, (None, 0))[0]

    def range(self, lo: Any, hi: Any) -> list[KeyValue]:
        return [
            KeyValue(k, v)
            for k, (v, _) in sorted(self.data.items())
            if (lo is None or k >= lo) and (hi is None or k <= hi)
        ]


class WindowModel(SegmentedModel):
    """Windows by ``(key, start)``; with duplicates by ``(key, start, seq)``."""

    def __init__(self, retention: int, interval: int, size: int, dups: bool = False) -> None:
        super().__init__(retention, interval)
        self.size = size
        self.dups = dups
        self.seq = 0
        self.data: dict[tuple[Any, int, int], Any] = {}

    def put(self, k: Any, v: Any, start: int) -> None:
        if self.dups and v is None:
            return
        self.observe(start)
        if self.segment_expired(start):
            if v is not None:
                self.dropped += 1
            return
        if self.dups:
            self.data[(k, start, self.seq)] = v
            self.seq += 1
        elif v is None:
            self.data.pop((k, start, 0), None)
        else:
            self.data[(k, start, 0)] = v

    def live(self) -> list[tuple[Any, int, int, Any]]:
        return [(k, s, q, v) for (k, s, q), v in self.data.items() if self.visible(s)]

    def windowed(self, k: Any, s: int) -> Windowed:
        return Windowed(k, Window(s, s + self.size))

    def fetch(self, k: Any, start: int) -> Any:
        found = sorted((q, v) for kk, s, q, v in self.live() if kk == k and s == start)
        return found[0][1] if found else None

    def fetch_range(self, k: Any, lo: int, hi: int) -> list[KeyValue]:
        rows = sorted((s, q, v) for kk, s, q, v in self.live() if kk == k and lo <= s <= hi)
        return [KeyValue(s, v) for s, _, v in rows]

    def fetch_key_range(self, klo: Any, khi: Any, lo: int, hi: int) -> list[KeyValue]:
        rows = sorted(
            (kk, s, q, v) for kk, s, q, v in self.live() if klo <= kk <= khi and lo <= s <= hi
        )
        return [KeyValue(self.windowed(kk, s), v) for kk, s, _, v in rows]

    def fetch_all(self, lo: int | None, hi: int | None) -> list[KeyValue]:
        rows = sorted(
            (s, kk, q, v)
            for kk, s, q, v in self.live()
            if (lo is None or lo <= s) and (hi is None or s <= hi)
        )
        return [KeyValue(self.windowed(kk, s), v) for s, kk, _, v in rows]


class SessionModel(SegmentedModel):
    """Sessions by ``(key, start, end)``."""

    def __init__(self, retention: int, interval: int) -> None:
        super().__init__(retention, interval)
        self.data: dict[tuple[Any, int, int], Any] = {}

    def put(self, k: Any, start: int, end: int, agg: Any) -> None:
        self.observe(end)
        if self.segment_expired(end):
            if agg is not None:
                self.dropped += 1
            return
        if agg is None:
            self.data.pop((k, start, end), None)
        else:
            self.data[(k, start, end)] = agg

    def live(self) -> list[tuple[Any, int, int, Any]]:
        return [(k, s, e, a) for (k, s, e), a in self.data.items() if self.visible(e)]

    def find(self, k: Any, earliest_end: int, latest_start: int) -> list[KeyValue]:
        rows = sorted(
            (e, s, a)
            for kk, s, e, a in self.live()
            if kk == k and e >= earliest_end and s <= latest_start
        )
        return [KeyValue(Windowed(k, Window(s, e)), a) for e, s, a in rows]

    def find_range(
        self, klo: Any, khi: Any, earliest_end: int, latest_start: int
    ) -> list[KeyValue]:
        rows = sorted(
            (kk, e, s, a)
            for kk, s, e, a in self.live()
            if klo <= kk <= khi and e >= earliest_end and s <= latest_start
        )
        return [KeyValue(Windowed(kk, Window(s, e)), a) for kk, e, s, a in rows]

    def all(self) -> list[KeyValue]:
        rows = sorted((e, s, kk, a) for kk, s, e, a in self.live())
        return [KeyValue(Windowed(kk, Window(s, e)), a) for e, s, kk, a in rows]

    def fetch_session(self, k: Any, start: int, end: int) -> Any:
        if not self.visible(end):
            return None
        return self.data.get((k, start, end))


def segments_held(store: Any) -> set[int]:
    """Every segment id physically present in the store's in-memory buckets (packed or built)."""
    return {s for data in store._buckets.values()
            for s in (data.segs.tolist() if isinstance(data, PackedBucket) else data)}
