"""Tumbling and hopping window aggregation (docs/semantics.md §3) on a hand-built topology."""

from __future__ import annotations

from typing import Any

import pytest

from kspark import serdes
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.windowing.common import LAST_EMIT
from kspark.dsl.internals.windowing.time_windows import (
    TimeWindowAggregateProcessor,
    time_window_store_builder,
)
from kspark.dsl.materialized import Materialized
from kspark.processor.api import Processor
from kspark.records import Change, Record
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import EmitStrategy, TimeWindows, Window, Windowed

Out = list[tuple[Any, Any, int]]


def Mat(name: str = "windows", retention=None, caching: bool = False,
        logging: bool = True) -> Materialized:
    """The DSL's Materialized with these tests' defaults."""
    return Materialized(name, retention=retention, caching=caching, logging=logging)


class Recorder(Processor):
    def __init__(self, out: Out) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def topology(
    windows: TimeWindows, out: Out, *, caching: bool = False, emit: EmitStrategy | None = None
) -> Topology:
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor(
        "agg",
        lambda: TimeWindowAggregateProcessor(
            "windows", windows, Aggregate(list, lambda k, v, agg: [*agg, v]), emit
        ),
        "src",
    )
    topo.add_state_store(time_window_store_builder("windows", windows, Mat(caching=caching)), "agg")
    topo.add_processor("rec", lambda: Recorder(out), "agg")
    return topo


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def dropped(driver: TopologyTestDriver) -> int:
    return driver.metrics()["dropped-records-total"]


def test_windows_for_assignment() -> None:
    tumbling = TimeWindows.of_size_with_no_grace(10)
    assert tumbling.windows_for(0) == [Window(0, 10)]
    assert tumbling.windows_for(19) == [Window(10, 20)]
    hopping = TimeWindows.of_size_with_no_grace(10).advance_by(4)
    # starts in (ts - 10, ts] and >= 0
    assert hopping.windows_for(13) == [Window(4, 14), Window(8, 18), Window(12, 22)]
    assert hopping.windows_for(3) == [Window(0, 10)]


@pytest.mark.parametrize("caching", [False, True])
def test_tumbling_updates_grace_and_result_timestamps(caching: bool) -> None:
    out: Out = []
    windows = TimeWindows.of_size_and_grace(10, 5)
    with TopologyTestDriver(topology(windows, out, caching=caching)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a3", 3)
        inp.pipe_input("A", "a7", 7)
        inp.pipe_input("A", "a1", 1)  # out of order: the result keeps the largest timestamp
        inp.pipe_input("A", "a12", 12)
        inp.pipe_input("B", "b14", 14)  # observed 14: close 9 < 10, [0, 10) still open
        inp.pipe_input("A", "a9", 9)
        assert out == [
            (W("A", 0, 10), Change(["a3"], None), 3),
            (W("A", 0, 10), Change(["a3", "a7"], ["a3"]), 7),
            (W("A", 0, 10), Change(["a3", "a7", "a1"], ["a3", "a7"]), 7),
            (W("A", 10, 20), Change(["a12"], None), 12),
            (W("B", 10, 20), Change(["b14"], None), 14),
            (W("A", 0, 10), Change(["a3", "a7", "a1", "a9"], ["a3", "a7", "a1"]), 9),
        ]
        out.clear()
        inp.pipe_input("B", "b15", 15)  # close 10: [0, 10) is closed
        out.clear()
        inp.pipe_input("A", "a8", 8)
        assert dropped(driver) == 1 and out == []
        store = driver.get_window_store("windows")
        assert store.fetch("A", 0) == ["a3", "a7", "a1", "a9"]
        assert store.fetch_with_timestamp("A", 0).timestamp == 9


def test_hopping_record_late_for_some_windows_updates_the_open_ones() -> None:
    out: Out = []
    windows = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a12", 12)  # windows [5, 15) and [10, 20)
        assert out == [
            (W("A", 5, 15), Change(["a12"], None), 12),
            (W("A", 10, 20), Change(["a12"], None), 12),
        ]
        out.clear()
        inp.pipe_input("A", "a7", 7)  # close 12: [0, 10) closed (counted), [5, 15) open
        assert dropped(driver) == 1
        assert out == [(W("A", 5, 15), Change(["a12", "a7"], ["a12"]), 12)]
        out.clear()
        inp.pipe_input("B", "b30", 30)
        out.clear()
        inp.pipe_input("A", "a14", 14)  # both its windows are closed: counted twice
        assert dropped(driver) == 3 and out == []
        inp.pipe_input("A", "a26", 26)  # [20, 30) closed (30 <= 30), [25, 35) open
        assert dropped(driver) == 4
        assert out == [(W("A", 25, 35), Change(["a26"], None), 26)]


def test_a_null_key_is_dropped_and_a_null_value_aggregated() -> None:
    out: Out = []
    with TopologyTestDriver(topology(TimeWindows.of_size_with_no_grace(10), out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input(None, "x", 1)
        assert dropped(driver) == 1 and out == []
        assert driver.get_window_store("windows").all() == []
        inp.pipe_input("A", None, 2)  # as Kafka Streams: the aggregator gets the null value
        assert dropped(driver) == 1
        assert out == [(W("A", 0, 10), Change([None], None), 2)]


@pytest.mark.parametrize("caching", [False, True])
def test_on_window_close_emits_each_window_once_after_it_closes(caching: bool) -> None:
    out: Out = []
    windows = TimeWindows.of_size_and_grace(10, 5)
    topo = topology(windows, out, caching=caching, emit=EmitStrategy.on_window_close())
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a3", 3)
        inp.pipe_input("A", "a7", 7)
        inp.pipe_input("B", "b12", 12)
        inp.pipe_input("A", "a14", 14)  # close 9 < 10
        inp.pipe_input("A", "a2", 2)  # [0, 10) still open: included in the final result
        assert out == []
        inp.pipe_input("B", "b15", 15)  # close 10 >= end 10
        assert out == [(W("A", 0, 10), Change(["a3", "a7", "a2"], None), 7)]
        inp.pipe_input("B", "b16", 16)
        inp.pipe_input("A", "a1", 1)  # late: dropped, nothing emitted again
        assert len(out) == 1 and dropped(driver) == 1
        inp.pipe_input("C", "c40", 40)  # close 35: [10, 20) of A and B, by start then key
        assert out[1:] == [
            (W("A", 10, 20), Change(["a14"], None), 14),
            (W("B", 10, 20), Change(["b12", "b15", "b16"], None), 16),
        ]
        assert driver.tasks[0].processor_state("agg")[LAST_EMIT] == 35
        inp.pipe_input("C", "c49", 49)
        assert len(out) == 3


def test_on_window_close_hopping() -> None:
    out: Out = []
    windows = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    topo = topology(windows, out, emit=EmitStrategy.on_window_close())
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a7", 7)  # [0, 10), [5, 15)
        inp.pipe_input("A", "a9", 9)
        inp.pipe_input("A", "a10", 10)  # close 10: [0, 10) closes
        assert out == [(W("A", 0, 10), Change(["a7", "a9"], None), 9)]
        inp.pipe_input("A", "a14", 14)
        inp.pipe_input("A", "a15", 15)  # close 15: [5, 15)
        assert out[1:] == [(W("A", 5, 15), Change(["a7", "a9", "a10", "a14"], None), 14)]
        inp.pipe_input("A", "a100", 100)  # [10, 20) and [15, 25)
        assert out[2:] == [
            (W("A", 10, 20), Change(["a10", "a14", "a15"], None), 15),
            (W("A", 15, 25), Change(["a15"], None), 15),
        ]


def test_store_builder_retention() -> None:
    windows = TimeWindows.of_size_and_grace(10, 5)
    store = time_window_store_builder("w", windows, None).build()
    assert (store.retention_ms, store.window_size_ms, store.caching) == (15, 10, True)
    assert time_window_store_builder("w", windows, Mat(retention=100)).build().retention_ms == 100
    with pytest.raises(ValueError, match="'win-store'"):
        time_window_store_builder("win-store", windows, Mat(retention=14))
