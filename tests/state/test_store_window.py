"""Unit tests of InMemoryWindowStore."""

from __future__ import annotations

import pytest

from kspark.errors import InvalidStateStoreError
from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state import InMemoryWindowStore, NullContext
from kspark.windows import Window, Windowed


def make(**kw) -> InMemoryWindowStore:
    params = {"retention_ms": 10_000, "window_size_ms": 100, "num_buckets": 8} | kw
    store = InMemoryWindowStore("ws", **params)
    store.init(NullContext())
    return store


def w(key: str, start: int, size: int = 100) -> Windowed:
    return Windowed(key, Window(start, start + size))


@pytest.fixture
def ws() -> InMemoryWindowStore:
    store = make()
    for key in ["b", "a", "c"]:
        for start in [300, 0, 200, 100]:
            store.put(key, f"{key}{start}", start)
    return store


def test_fetch_single_window(ws: InMemoryWindowStore) -> None:
    assert ws.fetch("a", 200) == "a200"
    assert ws.fetch("a", 250) is None
    assert ws.fetch("zz", 200) is None


def test_fetch_range_inclusive_by_start(ws: InMemoryWindowStore) -> None:
    assert ws.fetch_range("b", 100, 300) == [
        KeyValue(100, "b100"),
        KeyValue(200, "b200"),
        KeyValue(300, "b300"),
    ]
    assert ws.backward_fetch_range("b", 100, 300) == [
        KeyValue(300, "b300"),
        KeyValue(200, "b200"),
        KeyValue(100, "b100"),
    ]
    assert ws.fetch_range("b", 101, 299) == [KeyValue(200, "b200")]
    assert ws.fetch_range("b", 300, 100) == []


def test_fetch_key_range_ordered_by_key_then_start(ws: InMemoryWindowStore) -> None:
    got = ws.fetch_key_range("a", "b", 100, 200)
    assert got == [
        KeyValue(w("a", 100), "a100"),
        KeyValue(w("a", 200), "a200"),
        KeyValue(w("b", 100), "b100"),
        KeyValue(w("b", 200), "b200"),
    ]
    assert ws.backward_fetch_key_range("a", "b", 100, 200) == got[::-1]


def test_fetch_all_and_all_ordered_by_start_then_key(ws: InMemoryWindowStore) -> None:
    got = ws.fetch_all(100, 200)
    assert [(e.key.key, e.key.window.start) for e in got] == [
        ("a", 100),
        ("b", 100),
        ("c", 100),
        ("a", 200),
        ("b", 200),
        ("c", 200),
    ]
    assert ws.backward_fetch_all(100, 200) == got[::-1]
    everything = ws.all()
    assert [(e.key.window.start, e.key.key) for e in everything] == sorted(
        (s, k) for k in "abc" for s in (0, 100, 200, 300)
    )
    assert everything[0] == KeyValue(w("a", 0), "a0")
    assert ws.backward_all() == everything[::-1]


def test_put_none_deletes(ws: InMemoryWindowStore) -> None:
    ws.put("a", None, 200)
    assert ws.fetch("a", 200) is None
    assert [e.key for e in ws.fetch_range("a", 0, 1000)] == [0, 100, 300]


def test_none_key_and_read_only() -> None:
    store = make()
    with pytest.raises(ValueError, match="ws"):
        store.put(None, 1, 0)
    store.read_only = True
    with pytest.raises(InvalidStateStoreError):
        store.put("a", 1, 0)


def test_timestamp_defaults() -> None:
    store = make(logging=True)
    store.put("a", 1, 500)  # no record: the window start
    store.context.timestamp = 777
    store.put("b", 1, 500)
    store.put("c", 1, 500, timestamp=3)
    assert store.context.changelog == [
        (w("a", 500), 1, 500),
        (w("b", 500), 1, 777),
        (w("c", 500), 1, 3),
    ]


def test_retain_duplicates() -> None:
    store = make(retain_duplicates=True)
    store.put("a", 1, 100)
    store.put("a", 2, 100)
    store.put("a", None, 100)  # stores nothing, logged under its own number (as Kafka Streams)
    store.put("b", 3, 100)
    store.put("a", 4, 0)
    assert store.fetch_range("a", 0, 100) == [KeyValue(0, 4), KeyValue(100, 1), KeyValue(100, 2)]
    # the join's read: the late put at 0 comes first, equal starts in the order they were put
    assert store.fetch_values("a", 0, 100) == [(0, 4), (100, 1), (100, 2)]
    assert store.fetch_values("a", 50, 100) == [(100, 1), (100, 2)]
    assert store.fetch("a", 100) == 1
    assert store.all() == [
        KeyValue(w("a", 0), 4),
        KeyValue(w("a", 100), 1),
        KeyValue(w("a", 100), 2),
        KeyValue(w("b", 100), 3),
    ]
    # sequence numbers from 1, as Kafka Streams' changelogging window store gives them
    assert [(key, value) for key, value, _ in store.context.changelog] == [
        ((w("a", 100), 1), 1), ((w("a", 100), 2), 2), ((w("a", 100), 3), None),
        ((w("b", 100), 4), 3), ((w("a", 0), 5), 4)]


def test_a_wrapped_sequence_number_replaces_the_entry_it_meets() -> None:
    store = make(retain_duplicates=True)
    # restored up to Java's Integer.MAX_VALUE: the next puts number 0, then 1 again
    store.restore([((w("a", 100), 1), "x", 100), ((w("a", 100), (1 << 31) - 1), "y", 100)])
    store.put("a", "z", 100)
    store.put("a", "v", 100)  # sub key (100, 1): replaces "x", as Kafka Streams' store does
    assert store.fetch_values("a", 0, 200) == [(100, "z"), (100, "v"), (100, "y")]
    assert store.fetch_range("a", 0, 200) == [
        KeyValue(100, "z"), KeyValue(100, "v"), KeyValue(100, "y")]
    assert [key[1] for key, _, _ in store.context.changelog] == [0, 1]


def test_a_restore_replayed_twice_holds_each_entry_once() -> None:
    store = make(retain_duplicates=True)
    changelog = [((w("a", 100), seq), f"v{seq}", 100) for seq in (1, 2)]
    store.restore(changelog)
    store.restore(changelog[1:])  # one entry at a time (the record-by-record restore)
    store.restore(changelog)  # in bulk, into the key's held entries
    assert store.fetch_values("a", 0, 200) == [(100, "v1"), (100, "v2")]


@pytest.mark.parametrize(
    "kw",
    [
        {"retention_ms": 50, "window_size_ms": 100},
        {"window_size_ms": -5},
        {"retention_ms": -1, "window_size_ms": 1},
        {"segment_interval_ms": 0},
        {"retain_duplicates": True, "caching": True},
    ],
)
def test_invalid_arguments(kw: dict) -> None:
    with pytest.raises(ValueError):
        make(**kw)


def test_attributes_and_default_segment_interval() -> None:
    store = make(retention_ms=300_000, window_size_ms=1000)
    assert (store.retention_ms, store.window_size_ms) == (300_000, 1000)
    assert store.segment_interval_ms == 150_000
    assert make().segment_interval_ms == 60_000
    assert store.retain_duplicates is False
    assert store.kind == "window"


def test_timestamped_reads() -> None:
    store = make()
    store.put("a", "x", 100, timestamp=150)
    store.put("a", "y", 200, timestamp=260)
    store.put("b", "z", 100, timestamp=101)
    assert store.fetch_with_timestamp("a", 100) == ValueAndTimestamp("x", 150)
    assert store.fetch_with_timestamp("a", 300) is None
    assert store.fetch_range_with_timestamps("a", 0, 1000) == [
        KeyValue(100, ValueAndTimestamp("x", 150)),
        KeyValue(200, ValueAndTimestamp("y", 260)),
    ]
    assert store.fetch_all_with_timestamps(100, 100) == [
        KeyValue(w("a", 100), ValueAndTimestamp("x", 150)),
        KeyValue(w("b", 100), ValueAndTimestamp("z", 101)),
    ]


class _Unkept:
    """A task that keeps no changelog of the store (a Spark store without a changelog topic):
    a ``StoreContext`` as ``NullContext`` but for that (which compiled, takes no subclass)."""

    task_id = "unkept"

    def __init__(self) -> None:
        self.dropped, self.timestamp = 0, -1

    def record_timestamp(self) -> int:
        return self.timestamp

    def record_dropped(self, reason: str, detail: str) -> None:
        self.dropped += 1

    def log_change(self, store: str, key, value, timestamp: int) -> None:
        """Ignored, as a task ignores a change of a store whose changelog it does not keep."""

    def captures_changelog(self, store: str) -> bool:
        return False


@pytest.mark.parametrize("duplicates", [True, False])
def test_a_store_whose_changes_no_one_keeps_holds_and_drops_what_a_logged_one_does(
        duplicates: bool) -> None:
    """The put that records no change (a join's store on Spark without a changelog) against
    the logged one: the same windows, the same expired puts dropped and counted."""
    stores = []
    for context in (NullContext(), _Unkept()):
        store = InMemoryWindowStore("ws", retention_ms=1_000, window_size_ms=100,
                                    segment_interval_ms=500, retain_duplicates=duplicates)
        store.init(context)
        for i, start in enumerate([0, 300, 900, 2_000, 100, 1_200, 1_900, 950, 2_000]):
            context.timestamp = start
            store.put("ab"[i % 2], i, start)
        store.put("a", None, 2_000)
        stores.append((store, context))
    (logged, kept), (unlogged, unkept) = stores
    assert unlogged.all() == logged.all() and len(logged.all()) == 3 + duplicates
    assert unkept.dropped == kept.dropped == 2  # the puts at 100 and 950, after 2000's
    assert len(kept.changelog) == 10  # every put, expired ones too
