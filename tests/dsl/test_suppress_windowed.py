"""suppress(until_window_closes) behind real windowed aggregations, and its boundary next to
on_window_close's (docs/semantics.md §2.7: suppress releases once end <= close, on_window_close
once close > end)."""

from __future__ import annotations

from typing import Any

from kspark import serdes
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.suppress import SuppressProcessor, suppress_store_builder
from kspark.dsl.internals.windowing.session import (
    SessionWindowAggregateProcessor,
    session_store_builder,
)
from kspark.dsl.internals.windowing.time_windows import (
    TimeWindowAggregateProcessor,
    time_window_store_builder,
)
from kspark.dsl.materialized import Materialized
from kspark.dsl.suppressed import BufferConfig, Suppressed
from kspark.processor.api import Processor
from kspark.records import Change, Record
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import EmitStrategy, SessionWindows, TimeWindows, Window, Windowed

Out = list[tuple[Any, Any, int]]


def Mat(name: str = "store", retention=None, caching: bool = True,
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


def session_topology(windows: SessionWindows, suppressed_out: Out, final_out: Out) -> Topology:
    """One session aggregation suppressed until its windows close, and a second one with
    on_window_close, fed by the same input."""
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor(
        "agg",
        lambda: SessionWindowAggregateProcessor(
            "s1", windows, Aggregate(list, collect, lambda k, a, b: a + b)
        ),
        "src",
    )
    topo.add_state_store(session_store_builder("s1", windows, Mat("s1")), "agg")
    duration = windows.inactivity_gap_ms + windows.grace_ms
    suppressed = Suppressed.until_window_closes(BufferConfig.unbounded())
    topo.add_processor("suppress", lambda: SuppressProcessor(suppressed, "buf", duration), "agg")
    topo.add_state_store(suppress_store_builder("buf"), "suppress")
    topo.add_processor("rec", lambda: Recorder(suppressed_out), "suppress")
    topo.add_processor(
        "final",
        lambda: SessionWindowAggregateProcessor(
            "s2", windows, Aggregate(list, collect, lambda k, a, b: a + b),
            EmitStrategy.on_window_close()
        ),
        "src",
    )
    topo.add_state_store(session_store_builder("s2", windows, Mat("s2")), "final")
    topo.add_processor("rec2", lambda: Recorder(final_out), "final")
    return topo


def test_session_suppression_releases_at_end_le_close_one_ms_before_on_window_close() -> None:
    suppressed: Out = []
    final: Out = []
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5)
    with TopologyTestDriver(session_topology(windows, suppressed, final)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", "a0", 0)
        inp.pipe_input("A", "a2", 2)
        inp.pipe_input("A", "a1", 1)  # inside [0, 2]: tombstone + update upstream, buffered
        inp.pipe_input("B", "b6", 6)  # close 1
        assert suppressed == [] and final == []
        inp.pipe_input("B", "b7", 7)  # close 2: suppress releases [0, 2] (end <= close)
        expected = (Windowed("A", Window(0, 2)), Change(["a0", "a2", "a1"], None), 2)
        assert suppressed == [expected]
        assert final == []
        inp.pipe_input("B", "b8", 8)  # close 3 > 2: on_window_close emits it
        assert final == [expected]
        assert suppressed == [expected]


def test_time_window_suppression_emits_final_results_only() -> None:
    out: Out = []
    windows = TimeWindows.of_size_and_grace(10, 5)
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor(
        "agg", lambda: TimeWindowAggregateProcessor("w", windows, Aggregate(list, collect)), "src"
    )
    topo.add_state_store(time_window_store_builder("w", windows, Mat("w", caching=False)), "agg")
    suppressed = Suppressed.until_window_closes(BufferConfig.max_records(10).shut_down_when_full())
    topo.add_processor("suppress", lambda: SuppressProcessor(suppressed, "buf", 5), "agg")
    topo.add_state_store(suppress_store_builder("buf"), "suppress")
    topo.add_processor("rec", lambda: Recorder(out), "suppress")
    with TopologyTestDriver(topo) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        for value, ts in (("a3", 3), ("a7", 7), ("a12", 12), ("a9", 9), ("a14", 14)):
            inp.pipe_input("A", value, ts)
        assert out == []
        inp.pipe_input("A", "a15", 15)  # window end 10 <= 15 - 5
        # the final aggregate, old = None (the first buffered change's old value), and the
        # timestamp of the last update (the window's largest record timestamp)
        assert out == [(Windowed("A", Window(0, 10)), Change(["a3", "a7", "a9"], None), 9)]
        inp.pipe_input("A", "a25", 25)
        assert out[1:] == [(Windowed("A", Window(10, 20)), Change(["a12", "a14", "a15"], None), 15)]
