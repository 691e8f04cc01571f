"""Randomized checks of the session aggregation against the definition (docs/semantics.md §2)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.windowing.session import (
    SessionWindowAggregateProcessor,
    session_store_builder,
)
from kspark.dsl.materialized import Materialized
from kspark.processor.api import Processor
from kspark.records import Record
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import EmitStrategy, SessionWindows, Window, Windowed


def Mat(name: str = "sessions", retention=None, caching: bool = False,
        logging: bool = True) -> Materialized:
    """The DSL's Materialized with these tests' defaults."""
    return Materialized(name, retention=retention, caching=caching, logging=logging)


class Recorder(Processor):
    def __init__(self, out: list) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def topology(
    windows: SessionWindows,
    out: list,
    caching: bool,
    retention: int | None,
    emit: EmitStrategy | None = None,
) -> Topology:
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor(
        "agg",
        lambda: SessionWindowAggregateProcessor(
            "sessions", windows,
            Aggregate(list, lambda k, v, agg: [*agg, v], lambda k, a, b: a + b), emit
        ),
        "src",
    )
    topo.add_state_store(
        session_store_builder("sessions", windows, Mat(retention=retention, caching=caching)), "agg"
    )
    topo.add_processor("rec", lambda: Recorder(out), "agg")
    return topo


def gap_merge(points: list[tuple[int, int]], gap: int) -> list[tuple[Window, list[int]]]:
    """Sessions of ``(timestamp, id)`` points: sorted, split where consecutive timestamps are
    more than ``gap`` apart."""
    out: list[tuple[Window, list[int]]] = []
    for ts, ident in sorted(points):
        if out and ts - out[-1][0].end <= gap:
            window, ids = out[-1]
            out[-1] = (Window(window.start, ts), [*ids, ident])
        else:
            out.append((Window(ts, ts), [ident]))
    return [(window, sorted(ids)) for window, ids in out]


records_strategy = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 80)), min_size=1, max_size=30
)


def store_sessions(driver: TopologyTestDriver, key: str) -> list[tuple[Window, list[int]]]:
    return [
        (kv.key.window, sorted(kv.value)) for kv in driver.get_session_store("sessions").fetch(key)
    ]


def replay(out: list) -> dict[Windowed, Any]:
    """The table the forwarded changes describe."""
    table: dict[Windowed, Any] = {}
    for key, change, ts in out:
        assert ts == key.window.end
        if change.new_value is None:
            assert change.old_value is not None
            table.pop(key, None)
        else:
            table[key] = change.new_value
    return table


@settings(max_examples=300, deadline=None)
@given(
    records=records_strategy,
    gap=st.integers(1, 10),
    grace=st.integers(0, 10),
    caching=st.booleans(),
)
def test_sessions_are_the_gap_merge_of_the_accepted_records(
    records: list[tuple[str, int]], gap: int, grace: int, caching: bool
) -> None:
    """With a retention longer than the whole input nothing expires: a record is dropped
    exactly when its merged window (from the sessions stored before it) ends before the close
    time, and the stored sessions are the gap-merge of the accepted records."""
    windows = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    out: list = []
    accepted: dict[str, list[tuple[int, int]]] = {k: [] for k in "abc"}
    observed = -1
    with TopologyTestDriver(topology(windows, out, caching, retention=10_000)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for ident, (key, ts) in enumerate(records):
            before = store_sessions(driver, key)
            observed = max(observed, ts)
            close = observed - grace - gap
            near = [w for w, _ in before if w.end >= ts - gap and w.start <= ts + gap]
            merged_end = max([ts] + [w.end for w in near])
            dropped_before = driver.metrics()["dropped-records-total"]
            inp.pipe_input(key, ident, ts)
            was_dropped = driver.metrics()["dropped-records-total"] - dropped_before
            assert was_dropped == (1 if merged_end < close else 0)
            if not was_dropped:
                accepted[key].append((ts, ident))
            else:
                assert store_sessions(driver, key) == before
        for key in "abc":
            assert store_sessions(driver, key) == gap_merge(accepted[key], gap)
        table = replay(out)
        assert {w: sorted(v) for w, v in table.items()} == {
            Windowed(key, w): ids for key in "abc" for w, ids in gap_merge(accepted[key], gap)
        }


def model(
    records: list[tuple[str, int]],
    gap: int,
    grace: int,
) -> tuple[dict[str, list[tuple[Window, list[int]]]], set[int], int]:
    """§2 with the default retention (gap + grace + 1): sessions with ``end < close`` are
    expired and no longer found. Returns every session ever final per key, the dropped
    record ids and the final close time."""
    sessions: dict[str, list[tuple[Window, list[int]]]] = {k: [] for k in "abc"}
    dropped = set()
    observed = -1
    for ident, (key, ts) in enumerate(records):
        observed = max(observed, ts)
        close = observed - grace - gap
        near = [
            (w, ids)
            for w, ids in sessions[key]
            if w.end >= close and w.end >= ts - gap and w.start <= ts + gap
        ]
        start = min([ts] + [w.start for w, _ in near])
        end = max([ts] + [w.end for w, _ in near])
        if end < close:
            dropped.add(ident)
            continue
        for s in near:
            sessions[key].remove(s)
        sessions[key].append(
            (Window(start, end), sorted([ident] + [i for _, ids in near for i in ids]))
        )
    return sessions, dropped, observed - grace - gap


@settings(max_examples=300, deadline=None)
@given(
    records=records_strategy,
    gap=st.integers(1, 10),
    grace=st.integers(0, 10),
    caching=st.booleans(),
    final=st.booleans(),
)
def test_default_retention_and_emit_strategies_match_the_model(
    records: list[tuple[str, int]], gap: int, grace: int, caching: bool, final: bool
) -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    emit = EmitStrategy.on_window_close() if final else None
    out: list = []
    expected, expected_dropped, close = model(records, gap, grace)
    with TopologyTestDriver(topology(windows, out, caching, None, emit)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        dropped = set()
        for ident, (key, ts) in enumerate(records):
            before = driver.metrics()["dropped-records-total"]
            inp.pipe_input(key, ident, ts)
            if driver.metrics()["dropped-records-total"] > before:
                dropped.add(ident)
        assert dropped == expected_dropped
        for key in "abc":
            live = sorted((w, ids) for w, ids in expected[key] if w.end >= close)
            assert store_sessions(driver, key) == live
    if final:
        # each closed session exactly once, with its final aggregate, in order of end
        emitted = [(k.window.end, k, sorted(c.new_value)) for k, c, _ in out]
        assert all(c.old_value is None and ts == k.window.end for k, c, ts in out)
        assert [e[0] for e in emitted] == sorted(e[0] for e in emitted)
        assert sorted(emitted, key=repr) == sorted(
            (
                (w.end, Windowed(key, w), ids)
                for key in "abc"
                for w, ids in expected[key]
                if w.end < close
            ),
            key=repr,
        )
    else:
        # expiry sends no tombstones: the forwarded table holds every session ever made
        table = replay(out)
        assert {w: sorted(v) for w, v in table.items()} == {
            Windowed(key, w): ids for key in "abc" for w, ids in expected[key]
        }
