"""Sliding-window aggregation (docs/semantics.md §3), against hand-worked cases and a brute-force
reference computed from the definition of the windows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.windowing.sliding import (
    SlidingWindowAggregateProcessor,
    sliding_window_store_builder,
)
from kspark.dsl.materialized import Materialized
from kspark.processor.api import Processor
from kspark.records import Change, Record
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import EmitStrategy, SlidingWindows, Window, Windowed

Out = list[tuple[Any, Any, int]]


def Mat(name: str = "sliding", retention=None, caching: bool = False,
        logging: bool = True) -> Materialized:
    """The DSL's Materialized with these tests' defaults."""
    return Materialized(name, retention=retention, caching=caching, logging=logging)


class Recorder(Processor):
    def __init__(self, out: Out) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def topology(
    windows: SlidingWindows,
    out: Out,
    *,
    caching: bool = False,
    emit: EmitStrategy | None = None,
    retention: int | None = None,
) -> Topology:
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor(
        "agg",
        lambda: SlidingWindowAggregateProcessor(
            "sliding", windows, Aggregate(list, lambda k, v, agg: [*agg, v]), emit
        ),
        "src",
    )
    topo.add_state_store(
        sliding_window_store_builder("sliding", windows, Mat(retention=retention, caching=caching)),
        "agg",
    )
    topo.add_processor("rec", lambda: Recorder(out), "agg")
    return topo


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def dropped(driver: TopologyTestDriver) -> int:
    return driver.metrics()["dropped-records-total"]


def reference(records: list[tuple[int, Any]], diff: int) -> dict[Window, tuple[list, int]]:
    """The sliding windows of one key's records ``(timestamp, value)`` by definition: each
    record's left window ``[t - diff, t]`` (``[0, diff]`` when ``t < diff``) and, when a later
    record lies within ``diff + 1`` after it, its right window ``[t + 1, t + 1 + diff]``; each
    with the sorted values of the records inside and the largest timestamp among them."""
    starts = set()
    for t, _ in records:
        starts.add(max(0, t - diff))
        if any(t < u <= t + 1 + diff for u, _ in records):
            starts.add(t + 1)
    out = {}
    for s in starts:
        inside = [(t, v) for t, v in records if s <= t <= s + diff]
        out[Window(s, s + diff)] = (sorted(v for _, v in inside), max(t for t, _ in inside))
    return out


def test_hand_worked_updates_and_out_of_order_record() -> None:
    out: Out = []
    windows = SlidingWindows.of_time_difference_and_grace(10, 100)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a", 10)
        assert out == [(W("A", 0, 10), Change(["a"], None), 10)]
        out.clear()
        inp.pipe_input("A", "b", 15)
        # the previous record's right window, then the record's own left window
        assert out == [
            (W("A", 11, 21), Change(["b"], None), 15),
            (W("A", 5, 15), Change(["a", "b"], None), 15),
        ]
        out.clear()
        inp.pipe_input("A", "c", 30)
        assert out == [(W("A", 20, 30), Change(["c"], None), 30)]
        out.clear()
        inp.pipe_input("A", "d", 12)  # out of order
        # existing windows newest first (Kafka Streams' processReverse, checked against it)
        assert out == [
            (W("A", 11, 21), Change(["b", "d"], ["b"]), 15),
            (W("A", 5, 15), Change(["a", "b", "d"], ["a", "b"]), 15),
            (W("A", 2, 12), Change(["a", "d"], None), 12),
            (W("A", 13, 23), Change(["b"], None), 15),  # its right window: b only
        ]
        assert dropped(driver) == 0
        stored = {
            kv.key.window: (sorted(kv.value.value), kv.value.timestamp)
            for kv in driver.get_window_store("sliding").fetch_all_with_timestamps(None, None)
        }
        assert stored == reference([(10, "a"), (15, "b"), (30, "c"), (12, "d")], 10)


def test_early_records_share_the_window_from_zero() -> None:
    out: Out = []
    windows = SlidingWindows.of_time_difference_and_grace(10, 100)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for value, ts in (("x", 4), ("y", 2), ("z", 9), ("w", 13)):
            inp.pipe_input("A", value, ts)
        stored = {
            kv.key.window: (sorted(kv.value.value), kv.value.timestamp)
            for kv in driver.get_window_store("sliding").fetch_all_with_timestamps(None, None)
        }
        assert stored == reference([(4, "x"), (2, "y"), (9, "z"), (13, "w")], 10)
        assert stored[Window(0, 10)] == (["x", "y", "z"], 9)


def test_late_records_are_dropped_per_closed_window() -> None:
    out: Out = []
    windows = SlidingWindows.of_time_difference_with_no_grace(10)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a10", 10)
        inp.pipe_input("A", "a25", 25)  # close 25
        out.clear()
        inp.pipe_input("A", "a14", 14)  # 14 + 10 < 25: every window closed, counted once
        assert dropped(driver) == 1 and out == []
        inp.pipe_input("A", "a16", 16)
        # [15, 25] is updated (25 >= close 25), its right window [17, 27] created; the
        # previous record's right window [11, 21] and its own left window [6, 16] are closed
        assert dropped(driver) == 3
        assert out == [
            (W("A", 15, 25), Change(["a25", "a16"], ["a25"]), 25),
            (W("A", 17, 27), Change(["a25"], None), 25),
        ]


def test_on_window_close_emits_each_window_once() -> None:
    out: Out = []
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    topo = topology(windows, out, emit=EmitStrategy.on_window_close())
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a", 10)
        inp.pipe_input("A", "b", 15)  # [0, 10], [11, 21], [5, 15]
        inp.pipe_input("B", "x", 25)  # close 20: [0, 10] and [5, 15] end before it
        assert out == [
            (W("A", 0, 10), Change(["a"], None), 10),
            (W("A", 5, 15), Change(["a", "b"], None), 15),
        ]
        inp.pipe_input("B", "y", 26)  # close 21: [11, 21] ends at 21, not before: not yet
        assert len(out) == 2
        inp.pipe_input("B", "z", 27)  # close 22
        assert out[2:] == [(W("A", 11, 21), Change(["b"], None), 15)]


def test_store_builder_retention() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    store = sliding_window_store_builder("s", windows, None).build()
    # 2 * diff + grace, plus 1 ms so a record at the close time still sees [t - 2diff, ...]
    assert (store.retention_ms, store.window_size_ms) == (26, 10)
    with pytest.raises(ValueError, match="'slide'"):
        sliding_window_store_builder("slide", windows, Mat(retention=24))


@st.composite
def within_grace(draw: Any) -> tuple[int, int, list[tuple[str, int]]]:
    """Records out of order by at most the grace period (so none is late)."""
    diff = draw(st.integers(1, 12))
    grace = draw(st.integers(0, 15))
    steps = draw(
        st.lists(st.tuples(st.sampled_from("ab"), st.integers(-grace, 12)), min_size=1, max_size=25)
    )
    observed, records = 0, []
    for key, step in steps:
        ts = max(0, observed + step)
        observed = max(observed, ts)
        records.append((key, ts))
    return diff, grace, records


def run(
    diff: int,
    grace: int,
    records: list[tuple[str, int]],
    *,
    caching: bool,
    retention: int | None,
    emit: EmitStrategy | None = None,
) -> tuple[Out, dict[Windowed, tuple[list, int]], int]:
    out: Out = []
    windows = SlidingWindows.of_time_difference_and_grace(diff, grace)
    topo = topology(windows, out, caching=caching, emit=emit, retention=retention)
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for ident, (key, ts) in enumerate(records):
            inp.pipe_input(key, ident, ts)
        stored = {
            kv.key: (sorted(kv.value.value), kv.value.timestamp)
            for kv in driver.get_window_store("sliding").fetch_all_with_timestamps(None, None)
        }
        return out, stored, dropped(driver)


def expected_windows(
    diff: int,
    records: list[tuple[str, int]],
) -> dict[Windowed, tuple[list, int]]:
    return {
        Windowed(key, w): agg
        for key in "ab"
        for w, agg in reference(
            [(ts, i) for i, (k, ts) in enumerate(records) if k == key], diff
        ).items()
    }


@settings(max_examples=400, deadline=None)
@given(case=within_grace(), caching=st.booleans(), long_retention=st.booleans())
def test_sliding_windows_match_the_brute_force_reference(
    case: tuple[int, int, list[tuple[str, int]]], caching: bool, long_retention: bool
) -> None:
    diff, grace, records = case
    out, stored, n_dropped = run(
        diff, grace, records, caching=caching, retention=10_000 if long_retention else None
    )
    expected = expected_windows(diff, records)
    assert n_dropped == 0
    # the table the forwarded updates describe: latest value and timestamp per window
    table = {}
    for key, change, ts in out:
        assert change.new_value is not None
        table[key] = (sorted(change.new_value), ts)
    assert table == expected
    if long_retention:
        assert stored == expected


@settings(max_examples=300, deadline=None)
@given(case=within_grace())
def test_sliding_on_window_close_emits_the_closed_reference_windows_once(
    case: tuple[int, int, list[tuple[str, int]]],
) -> None:
    diff, grace, records = case
    out, _, _ = run(
        diff, grace, records, caching=False, retention=None, emit=EmitStrategy.on_window_close()
    )
    close = max(ts for _, ts in records) - grace
    expected = {
        w: agg for w, agg in expected_windows(diff, records).items() if w.window.end < close
    }
    emitted = [(key, (sorted(change.new_value), ts)) for key, change, ts in out]
    assert all(change.old_value is None for _, change, _ in out)
    assert len(emitted) == len(dict(emitted))  # each window once
    assert dict(emitted) == expected
