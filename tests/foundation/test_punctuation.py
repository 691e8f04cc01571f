"""Punctuation exactly as docs/semantics.md §5 (seed 002 by its code's rule)."""

from __future__ import annotations

import pytest

from kspark import serdes
from kspark.processor import Processor, PunctuationType
from kspark.processor.punctuation import PunctuationQueue, PunctuationSchedule
from kspark.records import Record
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology


def _driver(processor_cls: type[Processor], **kwargs: object) -> TopologyTestDriver:
    topo = Topology()
    topo.add_source("src", "in", serdes.String(), serdes.String())
    topo.add_processor("proc", processor_cls, "src")
    topo.add_sink("sink", "out", "proc", key_serde=serdes.String(), value_serde=serdes.String())
    return TopologyTestDriver(topo, **kwargs)


class Recorder(Processor):
    fired: list[tuple[str, int]] = []
    interval = 5000
    type = PunctuationType.STREAM_TIME

    def init(self, context):
        self.context = context
        self.handle = context.schedule(self.interval, self.type, self.punctuate)

    def punctuate(self, now: int) -> None:
        type(self).fired.append(("fire", now))

    def process(self, record: Record) -> None:
        pass


def test_seed_002_stream_time_fires_at_1_8_and_10_seconds():
    class P(Recorder):
        fired = []

    with _driver(P) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        for ts in (1000, 4000, 8000, 10000):
            topic.pipe_input("k", "v", ts)
    assert P.fired == [("fire", 1000), ("fire", 8000), ("fire", 10000)]


def test_stream_time_does_not_fire_without_records_or_when_time_does_not_move():
    class P(Recorder):
        fired = []

    with _driver(P) as driver:
        driver.advance_wall_clock_time(60_000)
        assert P.fired == []
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        topic.pipe_input("k", "v", 7000)
        topic.pipe_input("k", "v", 3000)  # out of order: stream time stays 7000
        topic.pipe_input("k", "v", 7000)
    assert P.fired == [("fire", 7000)]


def test_missed_intervals_are_skipped_and_phase_kept():
    schedule = PunctuationSchedule("p", 0, PunctuationType.STREAM_TIME, 5, 5, lambda t: None)
    assert schedule.next_due(21) == 25
    assert schedule.next_due(5) == 10
    assert schedule.next_due(9) == 10
    assert schedule.next_due(10) == 15


def test_queue_fires_with_now_not_due_and_reschedules_from_due():
    calls = []
    queue = PunctuationQueue()
    queue.add(PunctuationSchedule("p", 0, PunctuationType.STREAM_TIME, 5, 5, calls.append))
    fire = lambda s, now: s.callback(now)  # noqa: E731
    assert queue.may_punctuate(21, fire)
    assert calls == [21]
    assert not queue.may_punctuate(24, fire)
    assert queue.may_punctuate(25, fire)
    assert calls == [21, 25]


def test_wall_clock_fires_on_advance_without_any_record():
    class P(Recorder):
        fired = []
        interval = 1000
        type = PunctuationType.WALL_CLOCK_TIME

    with _driver(P, initial_wall_clock_ms=500) as driver:
        driver.advance_wall_clock_time(999)  # now 1499 < due 1500
        assert P.fired == []
        driver.advance_wall_clock_time(1)  # now 1500
        assert P.fired == [("fire", 1500)]
        driver.advance_wall_clock_time(3700)  # now 5200, due 2500: once, with now; next 5500
        assert P.fired == [("fire", 1500), ("fire", 5200)]
        driver.advance_wall_clock_time(299)
        assert len(P.fired) == 2
        driver.advance_wall_clock_time(1)
        assert P.fired[-1] == ("fire", 5500)


def test_interval_below_one_millisecond_is_rejected():
    class P(Recorder):
        fired = []
        interval = 0

    with pytest.raises(
        ValueError, match="The minimum supported scheduling interval is 1 millisecond"
    ):
        _driver(P)


def test_cancel_from_inside_the_callback_stops_the_schedule():
    class P(Recorder):
        fired = []
        interval = 10

        def punctuate(self, now):
            type(self).fired.append(("fire", now))
            self.handle.cancel()

    with _driver(P) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        for ts in (1, 20, 40, 60):
            topic.pipe_input("k", "v", ts)
    assert P.fired == [("fire", 1)]


def test_cancel_outside_the_callback():
    class P(Recorder):
        fired = []
        interval = 10

        def process(self, record):
            if record.value == "stop":
                self.handle.cancel()

    with _driver(P) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        topic.pipe_input("k", "v", 5)
        topic.pipe_input("k", "stop", 15)  # cancelled before the punctuation check
        topic.pipe_input("k", "v", 30)
    assert P.fired == [("fire", 5)]


def test_records_forwarded_from_a_punctuation_carry_its_time():
    class P(Recorder):
        fired = []
        interval = 10

        def punctuate(self, now):
            self.context.forward(Record("tick", "t"))
            self.context.forward(Record("explicit", "t", 3))

    with _driver(P) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.String())
        out = driver.create_output_topic("out", serdes.String(), serdes.String())
        topic.pipe_input("k", "v", 12)
        records = out.read_records_to_list()
    assert [(r.key, r.timestamp) for r in records] == [("tick", 12), ("explicit", 3)]


def test_punctuation_context_has_no_record_metadata_but_processing_does():
    seen = []

    class P(Recorder):
        fired = []
        interval = 10

        def punctuate(self, now):
            seen.append(("punctuate", self.context.record_metadata()))

        def process(self, record):
            seen.append(("process", self.context.record_metadata()))

    with _driver(P) as driver:
        driver.create_input_topic("in", serdes.String(), serdes.String()).pipe_input("k", "v", 1)
    assert seen[0][0] == "process"
    assert (seen[0][1].topic, seen[0][1].partition, seen[0][1].offset) == ("in", 0, 0)
    assert seen[1] == ("punctuate", None)
