"""Session-window aggregation processor (docs/semantics.md §2): merging, tombstones, late records,
caching and on_window_close, through the test driver on a hand-built topology."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kspark import serdes
from kspark.config import StreamsConfig
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.windowing.common import LAST_EMIT, OBSERVED
from kspark.dsl.internals.windowing.session import (
    SessionWindowAggregateProcessor,
    session_store_builder,
)
from kspark.dsl.materialized import Materialized
from kspark.processor.api import Processor
from kspark.records import Change, Record
from kspark.runtime.metrics import Metrics
from kspark.runtime.task import SourceRecord, Task
from kspark.state import DictBucketLoader
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import EmitStrategy, SessionWindows, Window, Windowed

Out = list[tuple[Any, Any, int]]


def Mat(name: str = "sessions", retention=None, caching: bool = False,
        logging: bool = True) -> Materialized:
    """The DSL's Materialized with these tests' defaults."""
    return Materialized(name, retention=retention, caching=caching, logging=logging)


class Recorder(Processor):
    def __init__(self, out: Out) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def collect(key: Any, value: Any, agg: list) -> list:
    return [*agg, value]


def merge(key: Any, a: list, b: list) -> list:
    return a + b


def topology(
    windows: SessionWindows,
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
        lambda: SessionWindowAggregateProcessor(
            "sessions", windows, Aggregate(list, collect, merge), emit),
        "src",
    )
    topo.add_state_store(
        session_store_builder("sessions", windows, Mat(retention=retention, caching=caching)), "agg"
    )
    topo.add_processor("rec", lambda: Recorder(out), "agg")
    return topo


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def sessions(driver: TopologyTestDriver, key: str) -> list[tuple[Windowed, Any]]:
    return [(kv.key, kv.value) for kv in driver.get_session_store("sessions").fetch(key)]


def dropped(driver: TopologyTestDriver) -> int:
    return driver.metrics()["dropped-records-total"]


def test_an_inactivity_gap_of_zero_joins_only_records_at_the_same_time() -> None:
    """As Kafka Streams' SessionWindows, which refuse only a negative gap."""
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(0, 10)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for value, ts in [("a", 10), ("b", 11), ("c", 11), ("d", 12)]:
            inp.pipe_input("A", value, ts)
        assert sessions(driver, "A") == [(W("A", 10, 10), ["a"]), (W("A", 11, 11), ["b", "c"]),
                                         (W("A", 12, 12), ["d"])]
    with pytest.raises(ValueError, match="inactivity gap must be >= 0 ms, got -1"):
        SessionWindows.of_inactivity_gap_with_no_grace(-1)


# -- seed 000: the close time decides --------------------------------------------------------
def test_seed000_record_merging_into_a_session_ending_before_close_is_dropped() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 2)
    # a long retention keeps [0, 3] readable, so the processor's close check is what drops
    with TopologyTestDriver(topology(windows, out, retention=100)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("A", "a3", 3)
        inp.pipe_input("B", "b20", 20)  # observed 20: close = 20 - 2 - 5 = 13
        out.clear()
        inp.pipe_input("A", "a7", 7)  # within the gap of [0, 3]; merged [0, 7] ends 7 < 13
        assert dropped(driver) == 1
        assert out == []
        assert sessions(driver, "A") == [(W("A", 0, 3), ["a0", "a3"])]
        inp.pipe_input("A", "a9", 9)  # a session of its own [9, 9]: 9 < 13, late too
        assert dropped(driver) == 2
        assert sessions(driver, "A") == [(W("A", 0, 3), ["a0", "a3"])]
        assert out == []


def test_seed000_record_whose_merged_window_ends_at_close_time_merges() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 2)
    with TopologyTestDriver(topology(windows, out)) as driver:  # default retention
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a10", 10)
        inp.pipe_input("A", "a15", 15)
        inp.pipe_input("B", "b22", 22)  # close = 22 - 7 = 15
        out.clear()
        inp.pipe_input("A", "a12", 12)  # 12 < close, but merged [10, 15] ends at 15 >= 15
        assert dropped(driver) == 0
        assert out == [
            (W("A", 10, 15), Change(None, ["a10", "a15"]), 15),
            (W("A", 10, 15), Change(["a10", "a15", "a12"], None), 15),
        ]
        inp.pipe_input("B", "b23", 23)  # close = 16 > 15
        out.clear()
        inp.pipe_input("A", "a11", 11)  # [10, 15] ends before the close time now: late
        assert dropped(driver) == 1
        assert out == []
        # a closed session is expired from the store (end 15 <= 23 - retention 8)
        assert sessions(driver, "A") == []


def test_a_record_after_close_time_opens_a_new_session() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("A", "a20", 20)  # close 15: 0 is not within the gap anyway
        inp.pipe_input("A", "a15", 15)  # close 15: [15, 20] ends at 20, merges
        assert dropped(driver) == 0
        assert sessions(driver, "A") == [(W("A", 15, 20), ["a20", "a15"])]
        assert out[-1] == (W("A", 15, 20), Change(["a20", "a15"], None), 20)


# -- KIP-94 merging, tombstones and timestamps --------------------------------------------------
SCRIPT = [
    ("A", "a0", 0),
    ("A", "a10", 10),
    ("A", "a5", 5),
    ("A", "a7", 7),
    ("B", "b50", 50),
    ("B", "b50'", 50),
]


def run_script(caching: bool) -> list[list[tuple[Any, Any, int]]]:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 100)
    per_record = []
    with TopologyTestDriver(topology(windows, out, caching=caching)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for key, value, ts in SCRIPT:
            inp.pipe_input(key, value, ts)
            per_record.append(list(out))
            out.clear()
        assert sessions(driver, "A") == [(W("A", 0, 10), ["a0", "a10", "a5", "a7"])]
        assert sessions(driver, "B") == [(W("B", 50, 50), ["b50", "b50'"])]
        assert dropped(driver) == 0
    return per_record


def test_kip94_merging_without_caching_forwards_every_update_and_tombstone() -> None:
    assert run_script(caching=False) == [
        [(W("A", 0, 0), Change(["a0"], None), 0)],
        [(W("A", 10, 10), Change(["a10"], None), 10)],
        # the bridging record: a tombstone per old session (timestamp = its end), then the
        # merged session (timestamp = merged end)
        [
            (W("A", 0, 0), Change(None, ["a0"]), 0),
            (W("A", 10, 10), Change(None, ["a10"]), 10),
            (W("A", 0, 10), Change(["a0", "a10", "a5"], None), 10),
        ],
        # a record inside a session: tombstone, then the same window again
        [
            (W("A", 0, 10), Change(None, ["a0", "a10", "a5"]), 10),
            (W("A", 0, 10), Change(["a0", "a10", "a5", "a7"], None), 10),
        ],
        [(W("B", 50, 50), Change(["b50"], None), 50)],
        # a record equal to a single-point session overwrites it without a tombstone
        [(W("B", 50, 50), Change(["b50", "b50'"], None), 50)],
    ]


def test_kip94_merging_with_caching_forwards_one_change_per_session_and_commit() -> None:
    assert run_script(caching=True) == [
        [(W("A", 0, 0), Change(["a0"], None), 0)],
        [(W("A", 10, 10), Change(["a10"], None), 10)],
        [
            (W("A", 0, 0), Change(None, ["a0"]), 0),
            (W("A", 10, 10), Change(None, ["a10"]), 10),
            (W("A", 0, 10), Change(["a0", "a10", "a5"], None), 10),
        ],
        # tombstone + put of the same session within one commit: one change, old from the store
        [(W("A", 0, 10), Change(["a0", "a10", "a5", "a7"], ["a0", "a10", "a5"]), 10)],
        [(W("B", 50, 50), Change(["b50"], None), 50)],
        [(W("B", 50, 50), Change(["b50", "b50'"], ["b50"]), 50)],
    ]


def test_three_sessions_bridged_and_merger_order() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(3, 50)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for v, ts in (("x", 10), ("y", 4), ("z", 7)):  # [4, 4], [7, 7], [10, 10]: z bridges
            inp.pipe_input("K", v, ts)
        # 7 merged [4, 4] and [10, 10] (store order: by end), then aggregated itself
        assert out[-3:] == [
            (W("K", 4, 4), Change(None, ["y"]), 4),
            (W("K", 10, 10), Change(None, ["x"]), 10),
            (W("K", 4, 10), Change(["y", "x", "z"], None), 10),
        ]
        out.clear()
        inp.pipe_input("K", "w", 14)  # 14 - 10 > 3: a new session
        assert out == [(W("K", 14, 14), Change(["w"], None), 14)]
        assert [w for w, _ in sessions(driver, "K")] == [W("K", 4, 10), W("K", 14, 14)]


@pytest.mark.parametrize("caching,emit", [(False, None), (True, None),
                                           (False, EmitStrategy.on_window_close())])
def test_an_aggregator_that_fails_leaves_the_merged_sessions_removed(caching, emit) -> None:
    """As in Kafka Streams, a record's merged sessions are removed before its aggregator runs:
    the aggregator failing leaves them removed, whichever way the processor writes."""

    def failing(key: Any, value: Any, agg: list) -> list:
        if value == "boom":
            raise RuntimeError("aggregator failed")
        return [*agg, value]

    windows = SessionWindows.of_inactivity_gap_and_grace(5, 50)
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor("agg", lambda: SessionWindowAggregateProcessor(
        "sessions", windows, Aggregate(list, failing, merge), emit), "src")
    topo.add_state_store(session_store_builder("sessions", windows, Mat(caching=caching)), "agg")
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("A", "a8", 8)
        inp.pipe_input("A", "a20", 20)
        with pytest.raises(Exception, match="aggregator failed"):
            inp.pipe_input("A", "boom", 4)  # bridges [0, 0] and [8, 8]
        assert sessions(driver, "A") == [(W("A", 20, 20), ["a20"])]


def test_a_null_key_is_skipped_and_counted_and_a_null_value_aggregated() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5)
    with TopologyTestDriver(topology(windows, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input(None, "v", 10)
        assert dropped(driver) == 1
        assert driver.metrics()["dropped-records-null-key"] == 1
        assert out == []
        # a skipped record does not move the processor's stream time
        assert OBSERVED not in driver.tasks[0].processor_state("agg")
        # as in Kafka Streams, a null value reaches the aggregator (docs/semantics.md §2)
        inp.pipe_input("A", None, 11)
        assert dropped(driver) == 1
        assert out == [(W("A", 11, 11), Change([None], None), 11)]


def test_store_builder_retention() -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 5)
    store = session_store_builder("s", windows, None).build()
    assert store.retention_ms == 16  # gap + grace, plus the 1 ms that keeps end == close
    assert store.caching  # caching is on by default
    assert session_store_builder("s", windows, Mat(retention=1000)).build().retention_ms == 1000
    assert (
        session_store_builder("s", windows, Mat(retention=timedelta(seconds=2)))
        .build()
        .retention_ms
        == 2000
    )
    with pytest.raises(ValueError, match="'my-store'"):
        session_store_builder("my-store", windows, Mat(retention=14))
    built = session_store_builder("s", windows, Mat(caching=False, logging=False)).build()
    assert not built.caching and not built.logging


# -- on_window_close ---------------------------------------------------------------------------
@pytest.mark.parametrize("caching", [False, True])
def test_on_window_close_emits_each_session_once_after_it_closes(caching: bool) -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 10)
    topo = topology(windows, out, caching=caching, emit=EmitStrategy.on_window_close())
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("A", "a2", 2)
        inp.pipe_input("B", "b17", 17)  # close = 17 - 10 - 5 = 2 == end of [0, 2]: not yet
        assert out == []
        inp.pipe_input("B", "b18", 18)  # close = 3 > 2: emitted
        assert out == [(W("A", 0, 2), Change(["a0", "a2"], None), 2)]
        inp.pipe_input("B", "b19", 19)  # close 4: nothing new, [0, 2] not again
        assert len(out) == 1
        # two sessions of C merged away before they close are never emitted
        inp.pipe_input("C", "c40", 40)  # close 25 > 19
        assert out[1:] == [(W("B", 17, 19), Change(["b17", "b18", "b19"], None), 19)]
        inp.pipe_input("C", "c50", 50)  # close 35
        inp.pipe_input("C", "c45", 45)
        assert len(out) == 2
        inp.pipe_input("D", "d100", 100)  # close 85
        assert out[2:] == [(W("C", 40, 50), Change(["c40", "c50", "c45"], None), 50)]
        assert driver.tasks[0].processor_state("agg")[LAST_EMIT] == 85
        inp.pipe_input("D", "d101", 101)
        assert len(out) == 3
        assert sessions(driver, "D") == [(W("D", 100, 101), ["d100", "d101"])]


def test_on_window_close_with_grace() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 10)
    topo = topology(windows, out, emit=EmitStrategy.on_window_close())
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("B", "b15", 15)  # close 0 == end of [0, 0]
        inp.pipe_input("A", "a3", 3)  # merged [0, 3] >= close 0: accepted
        assert out == []
        inp.pipe_input("B", "b18", 18)  # close 3 == end: not yet
        assert out == []
        inp.pipe_input("B", "b19", 19)  # close 4 > 3
        assert out == [(W("A", 0, 3), Change(["a0", "a3"], None), 3)]
        inp.pipe_input("A", "a1", 1)  # merged [0, 3] < close 4: late, nothing emitted again
        assert dropped(driver) == 1 and len(out) == 1


@pytest.mark.parametrize("retention", [None, 1000])
def test_on_window_close_session_extended_after_its_close(retention: int | None) -> None:
    """Kafka Streams' rule: a record with ts >= close is accepted and merges every session
    within the gap, even one whose end is already below the close time (and so already
    emitted). With the default retention that session is expired and cannot be merged."""
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 10)
    topo = topology(windows, out, emit=EmitStrategy.on_window_close(), retention=retention)
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a80", 80)
        inp.pipe_input("A", "a84", 84)
        inp.pipe_input("B", "b99", 99)  # close 84: [80, 84] not closed yet
        assert out == []
        inp.pipe_input("B", "b100", 100)  # close 85 > 84
        assert out == [(W("A", 80, 84), Change(["a80", "a84"], None), 84)]
        inp.pipe_input("A", "a87", 87)  # 87 >= close 85 and within the gap of 84
        assert dropped(driver) == 0
        inp.pipe_input("B", "b103", 103)  # close 88 > 87
        if retention is None:
            assert out[1:] == [(W("A", 87, 87), Change(["a87"], None), 87)]
        else:
            assert out[1:] == [(W("A", 80, 87), Change(["a80", "a84", "a87"], None), 87)]


def test_on_window_close_survives_a_restart() -> None:
    out: Out = []
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5)
    topo = topology(windows, out, emit=EmitStrategy.on_window_close())
    loader = DictBucketLoader()
    config = StreamsConfig.of(None)
    key_serde, value_serde = serdes.String(), serdes.Json()
    offset = 0

    def run(state: dict | None, records: list[tuple[str, str, int]]) -> tuple[Task, dict]:
        nonlocal offset
        task = Task(
            topo,
            topo.sub_topologies()[0],
            0,
            config=config,
            metrics=Metrics(),
            wall_clock=lambda: 0,
            loader=loader,
        )
        task.restore_state(state)
        task.init()
        for key, value, ts in records:
            task.process(
                SourceRecord(
                    "in", 0, offset, ts, key_serde.serialize(key), value_serde.serialize(value)
                )
            )
            offset += 1
            task.commit()
        for store in task.stores.values():
            loader.save(store)
        new_state = task.checkpoint_state()
        task.close()
        return task, new_state

    task, state = run(None, [("A", "a0", 0), ("A", "a3", 3), ("B", "b10", 10)])  # close 5
    assert out == [(W("A", 0, 3), Change(["a0", "a3"], None), 3)]
    assert state["processors"]["agg"] == {OBSERVED: 10, LAST_EMIT: 5}
    # after the restart: observed time 10 is remembered (a record at 4 is late), [0, 3] is
    # not emitted again, and B's session (restored from the store) is emitted once closed
    task, state = run(state, [("A", "a4", 4), ("C", "c20", 20)])
    assert task.metrics.snapshot()["dropped-records-total"] == 1
    assert out == [
        (W("A", 0, 3), Change(["a0", "a3"], None), 3),
        (W("B", 10, 10), Change(["b10"], None), 10),
    ]
    assert state["processors"]["agg"] == {OBSERVED: 20, LAST_EMIT: 15}
