"""Property tests: each store against a reference model (tests/state/state_models.py) over
random operation sequences whose timestamps go forward and back, so expiry is exercised."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_models import (
    KeyValueModel,
    Recorder,
    SessionModel,
    WindowModel,
    segments_held,
)

from kspark.records import KeyValue
from kspark.state import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    NullContext,
)
from kspark.windows import Window, Windowed

PROPS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
#: (time advance, how far back from the clock, two free parameters)
TIMING = st.tuples(st.integers(0, 25), st.integers(0, 150), st.integers(0, 60), st.integers(0, 60))


# -- key-value -------------------------------------------------------------------------------
KV_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["put", "put", "put", "put_none", "delete", "put_if_absent", "get", "range", "flush"]
        ),
        st.text("abc", max_size=3),
        st.text("abc", max_size=3),
        st.integers(0, 9),
    ),
    max_size=80,
)


@PROPS
@given(ops=KV_OPS, caching=st.booleans(), buckets=st.sampled_from([1, 3, 8]))
def test_key_value_store_matches_model(
    ops: list[tuple[str, str, str, int]], caching: bool, buckets: int
) -> None:
    store = InMemoryKeyValueStore("kv", caching=caching, num_buckets=buckets)
    ctx = NullContext()
    store.init(ctx)
    rec = Recorder()
    store.set_flush_listener(rec)
    model = KeyValueModel()
    dirty: dict[str, tuple[Any, int]] = {}  # cache model: key -> (first old, latest ts)
    logged: list[tuple[str, Any, int]] = []  # expected changelog without caching

    def changed(k: str, old: Any, new: Any, ts: int) -> None:
        if caching:
            first = dirty.pop(k, (old, ts))[0]
            dirty[k] = (first, ts)
        else:
            logged.append((k, new, ts))

    for step, (op, k, k2, n) in enumerate(ops):
        ctx.timestamp = step
        if op in ("put", "put_none"):
            v = None if op == "put_none" else n
            store.put(k, v)
            old = model.put(k, v, step)
            changed(k, old, v, step)  # a delete of an absent key too, as Kafka Streams logs it
        elif op == "delete":
            old = model.put(k, None, step)
            assert store.delete(k) == old
            changed(k, old, None, step)
        elif op == "put_if_absent":
            existing = model.get(k)
            assert store.put_if_absent(k, n) == existing
            if existing is None:
                model.put(k, n, step)
                changed(k, None, n, step)
        elif op == "get":
            assert store.get(k) == model.get(k)
            entry = store.get_with_timestamp(k)
            expected = model.data.get(k)
            assert (entry is None and expected is None) or tuple(entry) == expected
        elif op == "range":
            lo, hi = min(k, k2), max(k, k2)
            assert store.range(lo, hi) == model.range(lo, hi)
            assert store.reverse_range(lo, hi) == model.range(lo, hi)[::-1]
            assert store.prefix_scan(k) == [
                e for e in model.range(None, None) if e.key.startswith(k)
            ]
        elif op == "flush":
            store.flush()
            expected_events = [
                (key, model.get(key), old, ts)
                for key, (old, ts) in dirty.items()
                if old is not None or model.get(key) is not None
            ]
            # with a flush listener, a key absent before and after the commit is not logged
            logged.extend((key, model.get(key), ts) for key, (old, ts) in dirty.items()
                          if old is not None or model.get(key) is not None)
            dirty.clear()
            assert rec.take() == expected_events
        assert store.all() == model.range(None, None)
        assert store.approximate_num_entries() == len(model.data)
        assert ctx.changelog == logged
    assert rec.events == []


# -- window ----------------------------------------------------------------------------------
WINDOW_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "put",
                "put",
                "put",
                "put_none",
                "delete_existing",
                "fetch",
                "fetch_range",
                "fetch_key_range",
                "fetch_all",
            ]
        ),
        KEYS,
        KEYS,
        TIMING,
    ),
    max_size=60,
)
WINDOW_CONFIG = st.tuples(
    st.sampled_from([20, 60, 150]),  # retention
    st.sampled_from([5, 20]),  # window size
    st.sampled_from([None, 10, 25, 70]),  # segment interval (None: 60 s)
    st.sampled_from([1, 3, 8]),  # buckets
)


@PROPS
@given(ops=WINDOW_OPS, config=WINDOW_CONFIG, dups=st.booleans())
def test_window_store_matches_model(
    ops: list[tuple[str, str, str, tuple[int, int, int, int]]],
    config: tuple[int, int, int | None, int],
    dups: bool,
) -> None:
    retention, size, interval, buckets = config
    store = InMemoryWindowStore(
        "ws",
        retention,
        size,
        retain_duplicates=dups,
        segment_interval_ms=interval,
        num_buckets=buckets,
    )
    ctx = NullContext()
    store.init(ctx)
    model = WindowModel(retention, store.segment_interval_ms, size, dups)
    clock = 0
    for op, k, k2, (advance, back, p, q) in ops:
        clock += advance
        start = max(0, clock - back) // 5 * 5
        lo, hi = sorted((max(0, clock - 2 * p - q), max(0, clock - 2 * q)))
        if op == "put":
            store.put(k, p, start)
            model.put(k, p, start)
        elif op == "put_none":
            store.put(k, None, start)
            model.put(k, None, start)
        elif op == "delete_existing" and model.data:
            key, s, _ = sorted(model.data)[p % len(model.data)]
            store.put(key, None, s)
            model.put(key, None, s)
        elif op == "fetch":
            assert store.fetch(k, start) == model.fetch(k, start)
        elif op == "fetch_range":
            assert store.fetch_range(k, lo, hi) == model.fetch_range(k, lo, hi)
            assert store.backward_fetch_range(k, lo, hi) == model.fetch_range(k, lo, hi)[::-1]
            assert store.fetch_values(k, lo, hi) == [
                (kv.key, kv.value) for kv in model.fetch_range(k, lo, hi)]
        elif op == "fetch_key_range":
            klo, khi = sorted((k, k2))
            expected = model.fetch_key_range(klo, khi, lo, hi)
            assert store.fetch_key_range(klo, khi, lo, hi) == expected
            assert store.backward_fetch_key_range(klo, khi, lo, hi) == expected[::-1]
        elif op == "fetch_all":
            assert store.fetch_all(lo, hi) == model.fetch_all(lo, hi)
            assert store.backward_fetch_all(lo, hi) == model.fetch_all(lo, hi)[::-1]
        assert store.observed_stream_time == model.observed
        assert ctx.dropped == model.dropped
        assert store.all() == model.fetch_all(None, None)
        held = segments_held(store)
        assert not held or min(held) >= model.oldest_live_segment()
    assert store.backward_all() == model.fetch_all(None, None)[::-1]


# -- session ---------------------------------------------------------------------------------
SESSION_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "put",
                "put",
                "put",
                "remove",
                "remove_existing",
                "find",
                "find_range",
                "fetch",
                "fetch_session",
            ]
        ),
        KEYS,
        KEYS,
        TIMING,
    ),
    max_size=60,
)
SESSION_CONFIG = st.tuples(
    st.sampled_from([0, 30, 80, 200]),  # retention
    st.sampled_from([None, 10, 25, 70]),  # segment interval (None: 60 s)
    st.sampled_from([1, 3, 8]),  # buckets
)


@PROPS
@given(ops=SESSION_OPS, config=SESSION_CONFIG)
def test_session_store_matches_model(
    ops: list[tuple[str, str, str, tuple[int, int, int, int]]],
    config: tuple[int, int | None, int],
) -> None:
    retention, interval, buckets = config
    store = InMemorySessionStore("ss", retention, segment_interval_ms=interval, num_buckets=buckets)
    ctx = NullContext()
    store.init(ctx)
    model = SessionModel(retention, store.segment_interval_ms)
    clock = 0
    for op, k, k2, (advance, back, p, q) in ops:
        clock += advance
        end = max(0, clock - back) // 3 * 3
        start = max(0, end - p // 2 * 3)
        earliest_end, latest_start = max(0, clock - 2 * p), max(0, clock - 2 * q)

        def win(key: str, s: int = start, e: int = end) -> Windowed:
            return Windowed(key, Window(s, e))

        if op == "put":
            store.put(win(k), q)
            model.put(k, start, end, q)
        elif op == "remove":
            store.remove(win(k))
            model.put(k, start, end, None)
        elif op == "remove_existing" and model.data:
            key, s, e = sorted(model.data)[p % len(model.data)]
            store.remove(win(key, s, e))
            model.put(key, s, e, None)
        elif op == "find":
            expected = model.find(k, earliest_end, latest_start)
            assert store.find_sessions(k, earliest_end, latest_start) == expected
            assert store.backward_find_sessions(k, earliest_end, latest_start) == expected[::-1]
        elif op == "find_range":
            klo, khi = sorted((k, k2))
            expected = model.find_range(klo, khi, earliest_end, latest_start)
            assert store.find_sessions_range(klo, khi, earliest_end, latest_start) == expected
            assert (
                store.backward_find_sessions_range(klo, khi, earliest_end, latest_start)
                == expected[::-1]
            )
        elif op == "fetch":
            expected = model.find(k, -(10**9), 10**9)
            assert store.fetch(k) == expected
            assert store.backward_fetch(k) == expected[::-1]
        elif op == "fetch_session":
            if model.data:
                key, s, e = sorted(model.data)[p % len(model.data)]
                assert store.fetch_session(key, s, e) == model.fetch_session(key, s, e)
            assert store.fetch_session(k, start, end) == model.fetch_session(k, start, end)
        assert store.observed_stream_time == model.observed
        assert ctx.dropped == model.dropped
        assert store.all() == model.all()
        held = segments_held(store)
        assert not held or min(held) >= model.oldest_live_segment()
        names = ["a", "b", "c", "d", "e", "f"]
        buckets = [store.bucket_of(k) for k in names]
        assert store.stored_keys(names, buckets) == {
            i for i, k in enumerate(names) if store.raw_sessions(k, buckets[i])}
    assert store.backward_all() == model.all()[::-1]


REPLACE_OPS = st.lists(
    st.tuples(KEYS, TIMING, st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=3),
              st.sampled_from(["replace", "replace", "flush"])),
    max_size=50,
)


@PROPS
@given(ops=REPLACE_OPS, config=SESSION_CONFIG, caching=st.booleans())
def test_replace_sessions_is_removes_then_put(
    ops: list[tuple[str, tuple[int, int, int, int], list[tuple[int, bool]], str]],
    config: tuple[int, int | None, int],
    caching: bool,
) -> None:
    """``replace_sessions`` (a session aggregation's write) leaves, logs, caches, forwards and
    drops exactly what a ``remove`` of each removed session and a ``put`` do."""
    pair = _ReplacePair(*config, caching=caching)
    one_by_one, stores = pair.one_by_one, pair.stores
    clock = 0
    for k, (advance, back, p, q), picks, op in ops:
        clock += advance
        end = max(0, clock - back) // (3 if q % 2 else 1) * (3 if q % 2 else 1)
        start = max(0, end - p // 2 * 3)
        if op == "flush":
            for store in stores:
                store.flush()
            continue
        # stored sessions, expired ones included
        held = [(e, s_) for e, s_, _, _ in one_by_one.raw_sessions(k, one_by_one.bucket_of(k))]
        removed = []
        for i, existing in picks:  # stored sessions of the key, or absent ones
            if existing and held:
                removed.append(held[i % len(held)])
            else:
                e = max(0, end - i * 3)
                removed.append((e, max(0, e - i)))
        pair.replace(k, removed, start, end, q, clock)


class _ReplacePair:
    """Two session stores alike: one written with ``remove`` and ``put``, the other with
    ``replace_sessions``; :meth:`replace` writes both and compares everything they leave."""

    def __init__(self, retention: int, interval: int | None, buckets: int, *,
                 caching: bool) -> None:
        self.stores, self.contexts, self.listeners = [], [], []
        for _ in range(2):
            store = InMemorySessionStore("ss", retention, segment_interval_ms=interval,
                                         num_buckets=buckets, caching=caching)
            ctx, listener = NullContext(), Recorder()
            store.init(ctx)
            store.set_flush_listener(listener)
            self.stores.append(store)
            self.contexts.append(ctx)
            self.listeners.append(listener)
        self.one_by_one, self.bulk = self.stores

    def replace(self, k: str, removed: list[tuple[int, int]], start: int, end: int, agg: Any,
                clock: int) -> None:
        one_by_one, bulk = self.one_by_one, self.bulk
        for e, s_ in removed:
            one_by_one.remove(Windowed(k, Window(s_, e)), clock)
        one_by_one.put(Windowed(k, Window(start, end)), agg, clock)
        bulk.replace_sessions(k, removed, start, end, agg, clock)
        assert bulk._buckets == one_by_one._buckets
        assert bulk._dirty_buckets == one_by_one._dirty_buckets
        assert list(bulk._dirty.items()) == list(one_by_one._dirty.items())
        assert self.contexts[1].changelog == self.contexts[0].changelog
        assert self.contexts[1].dropped == self.contexts[0].dropped
        assert self.listeners[1].events == self.listeners[0].events
        assert bulk.observed_stream_time == one_by_one.observed_stream_time


@pytest.mark.parametrize("caching", [False, True])
@pytest.mark.parametrize("removed, start, end", [
    ([(90, 85)], 95, 120),  # stored but expired (end <= clock - retention), segment live
    ([(125, 121)], 121, 125),  # the same window again
    ([(139, 136)], 100, 120),  # not stored, ends after the clock: the clock moves first
    ([(60, 50)], 60, 120),  # in the segment before (expired)
    ([(110, 105), (118, 112)], 105, 120),  # two sessions merged
])
def test_replace_sessions_shapes(removed: list[tuple[int, int]], start: int, end: int,
                                 caching: bool) -> None:
    """``replace_sessions`` of shapes a random run rarely makes: clocks, expiry and segments
    around the session moved (retention 30 ms, segments of 70 ms, clock at 130)."""
    pair = _ReplacePair(30, 70, 1, caching=caching)
    for e, s_ in [(60, 50), (90, 85), (110, 105), (118, 112), (125, 121)]:
        for store in pair.stores:
            store.put(Windowed("a", Window(s_, e)), e, e)
    for store in pair.stores:
        store.put(Windowed("b", Window(130, 130)), 1, 130)
        store.flush()
    pair.replace("a", removed, start, end, 7, 131)


# -- changelog rebuild -----------------------------------------------------------------------
REBUILD_OPS = st.lists(
    st.tuples(st.sampled_from(["put", "put", "put", "delete", "flush"]), KEYS, TIMING),
    max_size=60,
)


def _run(store: Any, ops: list[tuple[str, str, tuple[int, int, int, int]]]) -> None:
    clock = 0
    for step, (op, k, (advance, back, p, q)) in enumerate(ops):
        store.context.timestamp = step
        clock += advance
        t = max(0, clock - back) // 5 * 5
        v = None if op == "delete" else p
        if op == "flush":
            store.flush()
        elif store.kind == "key_value":
            store.put(f"{k}{t % 3}", v)
        elif store.kind == "window":
            store.put(k, v, t)
        else:
            store.put(Windowed(k, Window(max(0, t - q), t)), v)
    store.flush()


def _queries(store: Any) -> list[Any]:
    if store.kind == "key_value":
        return [store.range("b", "d"), store.reverse_all(), store.get("a0")]
    if store.kind == "window":
        return [
            store.fetch_range("a", 0, 10**6),
            store.fetch_key_range("b", "d", 100, 400),
            store.backward_fetch_all(50, 300),
        ]
    return [
        store.find_sessions("a", 100, 300),
        store.find_sessions_range("b", "d", 0, 10**6),
        store.backward_fetch("c"),
    ]


STORE_CONFIG = st.sampled_from(
    [
        ("key_value", {}),
        ("window", {"retention_ms": 60, "window_size_ms": 10, "segment_interval_ms": 25}),
        ("window", {"retention_ms": 150, "window_size_ms": 10}),
        ("window_dups", {"retention_ms": 60, "window_size_ms": 10, "segment_interval_ms": 25}),
        ("session", {"retention_ms": 60, "segment_interval_ms": 25}),
        ("session", {"retention_ms": 150}),
    ]
)


def _build(kind: str, params: dict[str, Any], caching: bool, buckets: int) -> Any:
    if kind == "key_value":
        return InMemoryKeyValueStore("s", caching=caching, num_buckets=buckets)
    if kind == "session":
        return InMemorySessionStore("s", caching=caching, num_buckets=buckets, **params)
    dups = kind == "window_dups"
    return InMemoryWindowStore(
        "s", caching=caching and not dups, retain_duplicates=dups, num_buckets=buckets, **params
    )


@PROPS
@given(ops=REBUILD_OPS, config=STORE_CONFIG, caching=st.booleans(),
       chunk=st.sampled_from([None, 1, 3, 7]))
def test_store_rebuilt_from_changelog_is_identical(
    ops: list[tuple[str, str, tuple[int, int, int, int]]],
    config: tuple[str, dict[str, Any]],
    caching: bool,
    chunk: int | None,
) -> None:
    """A store restored from another's changelog, in one bulk call or in chunks (micro-batches;
    a chunk of 1 is record by record), equals it."""
    kind, params = config
    original = _build(kind, params, caching, buckets=8)
    original.init(NullContext())
    _run(original, ops)
    rebuilt = _build(kind, params, False, buckets=3)
    rebuilt.init(NullContext())
    changelog = original.context.changelog
    step = chunk or max(1, len(changelog))
    for at in range(0, len(changelog), step):
        rebuilt.restore(changelog[at:at + step])
    if kind == "window_dups":
        # a logged None (stored nothing, kept the original's stream time) moves the restored
        # store's observed stream time, as Kafka Streams' segmented stores restore every
        # record (semantics §7): the original, moved as far, is what the restore gives
        nulls = [original._decode(entry[0])[1] for entry in changelog if entry[1] is None]
        observed = max([original.meta()["observed_stream_time"], *nulls])
        assert rebuilt.meta()["observed_stream_time"] == observed
        original.advance_observed(observed)
    assert rebuilt.all() == original.all()
    assert _queries(rebuilt) == _queries(original)
    assert rebuilt.meta() == original.meta()
    assert rebuilt.context.changelog == []
    assert rebuilt.context.dropped == 0
    if kind == "key_value":
        assert all(isinstance(e, KeyValue) for e in rebuilt.all())
