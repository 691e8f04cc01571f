"""KTable.suppress: until_window_closes, until_time_limit, buffer limits, persistence."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from kspark import serdes
from kspark.config import StreamsConfig
from kspark.dsl.internals.suppress import (
    SuppressProcessor,
    suppress_store_builder,
)
from kspark.dsl.suppressed import BufferConfig, Suppressed
from kspark.errors import BufferFullError, StreamsError
from kspark.processor.api import Processor
from kspark.records import Change, Record
from kspark.runtime.metrics import Metrics
from kspark.runtime.task import SourceRecord, Task
from kspark.state import DictBucketLoader
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology
from kspark.windows import Window, Windowed

Out = list[tuple[Any, Any, int]]


class Feeder(Processor):
    """Turns ``key -> [new, old]`` into ``Change(new, old)`` and ``key -> [start, end, new,
    old]`` into ``Windowed(key, [start, end]) -> Change(new, old)``."""

    def process(self, record: Record) -> None:
        *window, new, old = record.value
        key = Windowed(record.key, Window(*window)) if window else record.key
        self.context.forward(Record(key, Change(new, old), record.timestamp))


class Recorder(Processor):
    def __init__(self, out: Out) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def topology(suppressed: Suppressed, out: Out, duration: int | None = None) -> Topology:
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.Json())
    topo.add_processor("feed", Feeder, "src")
    topo.add_processor(
        "suppress", lambda: SuppressProcessor(suppressed, "buffer", duration), "feed"
    )
    topo.add_state_store(suppress_store_builder("buffer"), "suppress")
    topo.add_processor("rec", lambda: Recorder(out), "suppress")
    return topo


def W(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def test_until_window_closes_releases_the_latest_value_once_end_le_observed_minus_grace() -> None:
    out: Out = []
    suppressed = Suppressed.until_window_closes(BufferConfig.unbounded())
    with TopologyTestDriver(topology(suppressed, out, duration=5)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", [0, 10, 1, None], 3)
        inp.pipe_input("A", [0, 10, 2, 1], 7)
        inp.pipe_input("B", [10, 20, 1, None], 14)  # 10 > 14 - 5: A still buffered
        assert out == []
        inp.pipe_input("B", [10, 20, 2, 1], 15)  # 10 <= 15 - 5: A released
        # latest value, old = the value before the first buffered change, latest timestamp
        assert out == [(W("A", 0, 10), Change(2, None), 7)]
        inp.pipe_input("B", [10, 20, 3, 2], 24)
        assert len(out) == 1
        inp.pipe_input("C", [30, 40, 1, None], 25)  # 20 <= 25 - 5: B released once
        assert out[1:] == [(W("B", 10, 20), Change(3, None), 24)]
        # an update of an already closed window is released at once
        inp.pipe_input("A", [0, 10, 9, 2], 26)
        assert out[2:] == [(W("A", 0, 10), Change(9, 2), 26)]


def test_until_window_closes_drops_tombstones() -> None:
    out: Out = []
    suppressed = Suppressed.until_window_closes(BufferConfig.unbounded())
    with TopologyTestDriver(topology(suppressed, out, duration=2)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        # a session merged away ([0, 5] deleted) before it closes: never emitted
        inp.pipe_input("S", [0, 5, ["a"], None], 5)
        inp.pipe_input("S", [0, 5, None, ["a"]], 5)
        inp.pipe_input("S", [0, 7, ["a", "b"], None], 7)  # [0, 5] due (5 <= 7 - 2): dropped
        assert out == []
        # a tombstone for a window with an earlier value is not a final result either
        inp.pipe_input("U", [8, 9, None, ["u"]], 9)
        inp.pipe_input("T", [20, 20, ["c"], None], 20)
        assert out == [(W("S", 0, 7), Change(["a", "b"], None), 7)]


def test_until_window_closes_needs_a_strict_buffer() -> None:
    with pytest.raises(ValueError, match="strict"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))
    with pytest.raises(ValueError, match="strict"):
        Suppressed.until_window_closes(
            BufferConfig.unbounded().with_max_bytes(10).emit_early_when_full()
        )
    Suppressed.until_window_closes(BufferConfig.max_records(3).shut_down_when_full())
    Suppressed.until_window_closes(BufferConfig.unbounded().with_max_records(3))  # stays strict
    with pytest.raises(ValueError, match="grace"):
        SuppressProcessor(Suppressed.until_window_closes(), "buffer", None)


def test_buffer_config_and_suppressed_values() -> None:
    assert BufferConfig.unbounded() == BufferConfig(None, None, "shut_down")
    assert not BufferConfig.unbounded().bounded
    assert BufferConfig.max_records(5) == BufferConfig(5, None, "emit_early")
    assert BufferConfig.max_bytes(7) == BufferConfig(None, 7, "emit_early")
    config = BufferConfig.max_records(5).with_max_bytes(100).shut_down_when_full()
    assert (config.records_limit, config.bytes_limit, config.emits_early) == (5, 100, False)
    assert BufferConfig.unbounded().with_max_records(2).emits_early is False
    with pytest.raises(ValueError):
        BufferConfig.max_records(-1)
    with pytest.raises(TypeError):
        BufferConfig.max_bytes("10")  # type: ignore[arg-type]
    s = Suppressed.until_time_limit(10, BufferConfig.max_records(2)).with_name("sup")
    assert (s.name, s.time_limit_ms, s.until_window_close) == ("sup", 10, False)
    from datetime import timedelta

    assert Suppressed.until_time_limit(timedelta(seconds=1)).time_limit_ms == 1000
    assert Suppressed.until_window_closes().until_window_close
    with pytest.raises(ValueError):
        Suppressed.until_time_limit(-1)


def test_until_time_limit_releases_once_first_buffered_time_le_observed_minus_limit() -> None:
    out: Out = []
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", ["x", None], 0)
        inp.pipe_input("A", ["y", "x"], 5)
        inp.pipe_input("B", ["b", None], 9)
        assert out == []
        inp.pipe_input("B", ["b2", "b"], 10)  # A buffered at 0 <= 10 - 10
        assert out == [("A", Change("y", None), 5)]
        inp.pipe_input("A", ["z", "y"], 12)  # buffered anew at 12
        inp.pipe_input("C", ["c", None], 18)
        assert len(out) == 1
        inp.pipe_input("C", ["c", None], 19)  # B (buffered at 9) <= 9
        assert out[1:] == [("B", Change("b2", None), 10)]
        inp.pipe_input("C", ["c", None], 22)  # A (12) <= 12
        assert out[2:] == [("A", Change("z", "y"), 12)]


def test_until_time_limit_releases_deletes() -> None:
    out: Out = []
    suppressed = Suppressed.until_time_limit(0, BufferConfig.unbounded())
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("D", [None, "old"], 4)
        assert out == [("D", Change(None, "old"), 4)]
    out.clear()
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("D", ["v", "old"], 1)
        inp.pipe_input("D", [None, "v"], 2)
        inp.pipe_input("E", ["e", None], 3)  # created and deleted while buffered: still a
        inp.pipe_input("E", [None, "e"], 4)  # delete, Change(None, None), as Kafka Streams
        inp.pipe_input("F", ["f", None], 20)
        assert out == [("D", Change(None, "old"), 2), ("E", Change(None, None), 4)]


def test_max_records_emits_the_oldest_early() -> None:
    out: Out = []
    suppressed = Suppressed.until_time_limit(1000, BufferConfig.max_records(2))
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", ["a", None], 1)
        inp.pipe_input("B", ["b", None], 2)
        assert out == []
        inp.pipe_input("C", ["c", None], 3)
        assert out == [("A", Change("a", None), 1)]
        inp.pipe_input("B", ["b2", "b"], 4)  # an update keeps B's place (buffered at 2)
        assert len(out) == 1
        inp.pipe_input("D", ["d", None], 5)
        assert out[1:] == [("B", Change("b2", None), 4)]


def test_shut_down_when_full_raises_buffer_full_error() -> None:
    out: Out = []
    suppressed = Suppressed.until_window_closes(BufferConfig.max_records(1).shut_down_when_full())
    with TopologyTestDriver(topology(suppressed, out, duration=100)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", [0, 10, 1, None], 1)
        inp.pipe_input("A", [0, 10, 2, 1], 2)  # same key: still one record
        with pytest.raises(BufferFullError, match=r"'suppress'.*\[2/1\] records") as err:
            inp.pipe_input("B", [0, 10, 1, None], 3)
        assert isinstance(err.value, StreamsError)
        assert "offset 2" in str(err.value)
        assert out == []


def size(key: Any, value: Any) -> int:
    """The documented estimate: pickled key plus pickled (latest new) value."""
    return len(pickle.dumps(key)) + len(pickle.dumps(value))


def test_max_bytes_emits_early_by_estimated_size() -> None:
    out: Out = []
    one = size("A", "aaaa")
    assert one == size("B", "bbbb") == size("C", "cccc")
    suppressed = Suppressed.until_time_limit(1000, BufferConfig.max_bytes(2 * one))
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", ["aaaa", None], 1)
        inp.pipe_input("B", ["bbbb", None], 2)
        assert out == []
        inp.pipe_input("C", ["cccc", None], 3)
        assert out == [("A", Change("aaaa", None), 1)]
        inp.pipe_input("B", ["b", "bbbb"], 4)  # smaller: fits
        assert len(out) == 1
        inp.pipe_input("B", ["b" * 100, "b"], 6)  # too big: the oldest (B itself) goes
        assert out[1:] == [("B", Change("b" * 100, None), 6)]
        inp.pipe_input("D", ["dddd", None], 7)
        assert len(out) == 2
    suppressed = Suppressed.until_time_limit(
        1000, BufferConfig.max_bytes(2 * one).shut_down_when_full()
    )
    with TopologyTestDriver(topology(suppressed, out)) as driver:
        inp = driver.create_input_topic("in", serdes.String(), serdes.Json())
        inp.pipe_input("A", ["aaaa", None], 1)
        inp.pipe_input("B", ["bbbb", None], 2)
        with pytest.raises(BufferFullError, match=rf"\[{3 * one}/{2 * one}\] bytes"):
            inp.pipe_input("C", ["cccc", None], 3)


def test_buffer_survives_a_restart() -> None:
    out: Out = []
    suppressed = Suppressed.until_time_limit(10, BufferConfig.max_records(3))
    topo = topology(suppressed, out)
    loader = DictBucketLoader()
    config = StreamsConfig.of(None)
    offset = 0

    def run(state: dict | None, records: list[tuple[str, list, int]]) -> dict:
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
                    "in",
                    0,
                    offset,
                    ts,
                    serdes.String().serialize(key),
                    serdes.Json().serialize(value),
                )
            )
            offset += 1
            task.commit()
        for store in task.stores.values():
            loader.save(store)
        new_state = task.checkpoint_state()
        task.close()
        return new_state

    state = run(None, [("A", ["a", None], 0), ("B", ["b", None], 3), ("A", ["a2", "a"], 5)])
    assert out == []
    # restarted: A keeps its buffered time 0 and prior None; observed time 5 is remembered
    state = run(state, [("C", ["c", None], 1), ("C", ["c2", "c"], 2)])
    assert out == []
    state = run(state, [("D", ["d", None], 4)])  # 4 keys > 3: the oldest (A) early
    assert out == [("A", Change("a2", None), 5)]
    state = run(state, [("B", ["b2", "b"], 12)])  # observed 12: C (buffered at 1) due
    assert out[1:] == [("C", Change("c2", None), 2)]
    run(state, [("E", ["e", None], 13)])  # observed 13: B (buffered at 3) due
    assert out[2:] == [("B", Change("b2", None), 12)]
