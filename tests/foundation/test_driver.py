"""The test driver with stores, bad input and user errors (docs/semantics.md §8)."""

from __future__ import annotations

import pytest

from kspark import serdes
from kspark.config import StreamsConfig
from kspark.errors import InvalidStateStoreError, NoSuchElementError, StreamsError
from kspark.processor import Processor, PunctuationType
from kspark.records import Record
from kspark.runtime.metrics import Metrics
from kspark.runtime.task import SourceRecord, Task
from kspark.state.builders import Stores
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology


class WallClockCounter(Processor):
    """Counts per key in a store; forwards all counts on a wall-clock punctuator."""

    def init(self, context):
        self.context = context
        self.store = context.get_state_store("counts")
        context.schedule(10_000, PunctuationType.WALL_CLOCK_TIME, self.emit)

    def process(self, record):
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)

    def emit(self, now):
        for key, count in self.store.all():
            self.context.forward(Record(key, count, now))


def counter_topology(**source_serdes) -> Topology:
    topo = Topology()
    topo.add_source(
        "src",
        "clicks",
        source_serdes.get("key", serdes.String()),
        source_serdes.get("value", serdes.Json()),
    )
    topo.add_processor("count", WallClockCounter, "src")
    topo.add_state_store(Stores.key_value_store("counts"), "count")
    topo.add_sink(
        "out", "counts-out", "count", key_serde=serdes.String(), value_serde=serdes.Long()
    )
    return topo


def test_wall_clock_counter_forwards_store_contents_and_store_is_readable():
    with TopologyTestDriver(counter_topology()) as driver:
        clicks = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
        out = driver.create_output_topic("counts-out", serdes.String(), serdes.Long())
        for user in ["a", "b", "a", "c", "a"]:
            clicks.pipe_input(user, {"page": "/"}, 1)
        assert out.is_empty()
        driver.advance_wall_clock_time(10_000)
        assert out.read_key_values_to_list() == [("a", 3), ("b", 1), ("c", 1)]
        store = driver.get_key_value_store("counts")
        assert dict(store.all()) == {"a": 3, "b": 1, "c": 1}
        clicks.pipe_input("b", {"page": "/x"}, 2)
        driver.advance_wall_clock_time(10_000)
        records = out.read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            ("a", 3, 20_000),
            ("b", 2, 20_000),
            ("c", 1, 20_000),
        ]
        with pytest.raises(NoSuchElementError):
            out.read_record()


def test_first_wall_clock_report_happens_at_interval():
    with TopologyTestDriver(counter_topology(), initial_wall_clock_ms=5) as driver:
        clicks = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
        out = driver.create_output_topic("counts-out", serdes.String(), serdes.Long())
        clicks.pipe_input("a", {}, 1)
        driver.advance_wall_clock_time(9_999)
        assert out.is_empty()
        driver.advance_wall_clock_time(1)
        assert out.read_key_values_to_map() == {"a": 1}


def test_undecodable_value_stops_with_topic_partition_offset_and_serde():
    with TopologyTestDriver(counter_topology()) as driver:
        clicks = driver.create_input_topic("clicks", serdes.String(), serdes.String())
        clicks.pipe_input("a", '{"ok": 1}', 1)
        with pytest.raises(StreamsError) as err:
            clicks.pipe_input("a", "{broken", 2)
    message = str(err.value)
    assert "topic 'clicks'" in message and "partition 0" in message and "offset 1" in message
    assert "Json" in message


def test_log_and_continue_skips_counts_and_dead_letters_the_record():
    config = {
        "default.deserialization.exception.handler": "log_and_continue",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    with TopologyTestDriver(counter_topology(), config=config) as driver:
        clicks = driver.create_input_topic("clicks", serdes.String(), serdes.String())
        clicks.pipe_input("a", "{broken", 1)
        clicks.pipe_input("a", "{}", 2)
        assert driver.metrics()["dropped-records-total"] == 1
        assert dict(driver.get_key_value_store("counts").all()) == {"a": 1}
        dead = driver.create_output_topic("dlq", serdes.String(), serdes.String()).read_record()
    assert dead.value == "{broken"
    assert dict(dead.headers)["__kspark.origin"] == b"clicks/0/0"


def test_user_function_error_names_processor_and_record_coordinates():
    class Boom(Processor):
        def process(self, record):
            raise ZeroDivisionError("bad math")

    topo = Topology().add_source("src", "in", serdes.String(), serdes.String())
    topo.add_processor("boom", Boom, "src")
    with TopologyTestDriver(topo) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        with pytest.raises(StreamsError) as err:
            topic.pipe_input("user-7", "v", 42)
    message = str(err.value)
    for part in ("'boom'", "topic 'in'", "partition 0", "offset 0", "'user-7'", "bad math"):
        assert part in message


def test_unknown_store_access_names_the_stores():
    class Wrong(Processor):
        def init(self, context):
            context.get_state_store("nope")

        def process(self, record):
            pass

    topo = counter_topology()
    topo.add_processor("wrong", Wrong, "src")
    with pytest.raises(InvalidStateStoreError, match="nope"):
        TopologyTestDriver(topo)


def test_task_state_round_trip_keeps_stream_time_and_punctuation_phase():
    fired = []

    class P(Processor):
        def init(self, context):
            context.schedule(100, PunctuationType.STREAM_TIME, fired.append)

        def process(self, record):
            pass

    topo = Topology().add_source("src", "in", serdes.String(), serdes.String())
    topo.add_processor("p", P, "src")
    config = StreamsConfig.of(None)

    def new_task(state):
        task = Task(
            topo,
            topo.sub_topologies()[0],
            0,
            config=config,
            metrics=Metrics(),
            wall_clock=lambda: 0,
        )
        task.restore_state(state)
        task.init()
        return task

    def feed(task, offset, ts):
        task.process(SourceRecord("in", 0, offset, ts, b"k", b"v"))
        task.punctuate_stream_time()

    task = new_task(None)
    feed(task, 0, 150)  # fires at 150, next due 200
    state = task.checkpoint_state()
    assert state["stream_time"] == 150
    restarted = new_task(state)
    feed(restarted, 1, 120)  # behind stream time: no fire (a fresh task would fire at 120)
    feed(restarted, 2, 210)
    assert fired == [150, 210]
    assert restarted.stream_time == 210
