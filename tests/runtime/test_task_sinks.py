"""What a stage writes itself (:mod:`kspark.spark.internals.task_sinks`), without Spark: a task's
records of the written topics split from the rest in output order, each writer given its own
topics in one call per task, the stages that may write told from those that cannot. The Kafka
writer behind it is tested end to end in tests/kafka (test_kafka_end_to_end.py,
test_kafka_exactly_once.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kspark.io.location import TaskWriter
from kspark.runtime.metrics import Metrics
from kspark.spark.internals import task_sinks
from kspark.spark.internals.task_sinks import TaskSinks, TopicRecords, chunked


class RecordingWriter(TaskWriter):
    """A task writer that keeps what it is asked to do (a stand-in for a Kafka cluster)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def take_over(self, tasks):
        self.calls.append(("take_over", dict(tasks)))

    def open_task(self, batch_id, run, task):
        self.calls.append(("open", batch_id, run, task))

    def write_task(self, batch_id, run, task, rows, final=True):
        taken = {topic: [row for chunk in chunks for row in chunk]
                 for topic, chunks in rows.items()}
        self.calls.append(("write" if final else "send", batch_id, run, task, taken))
        return {"sink.records.written": sum(map(len, taken.values()))}

    def abort_task(self, task):
        self.calls.append(("abort", task))


    def close_task(self, task):
        self.calls.append(("close", task))

    def close_tasks(self):
        self.calls.append(("close_tasks",))


def rows_of(records: TopicRecords) -> list:
    return [row for chunk in records.chunks for row in chunk]


@dataclass
class Sub:
    sink_topics: list[str]
    stores: list[str] = field(default_factory=list)


def test_a_tasks_records_of_the_written_topics_split_from_the_rest_in_order():
    sinks = TaskSinks([(RecordingWriter(), ["out", "dlq"])])
    topics = ["out", "rep", "dlq", "out", "rep", "out"]
    keys = [b"k%d" % i for i in range(6)]
    values = [b"v%d" % i for i in range(6)]
    stamps = [10, 11, 12, 13, 14, 15]
    parts = [0, 1, 2, 0, 1, 3]
    headers = [None, None, (("error", b"bad"),), (), None, None]
    written, keep = sinks.split(topics, keys, values, stamps, parts, headers)
    assert {topic: rows_of(records) for topic, records in written.items()} == {
        "out": [(b"k0", b"v0", 10, 0, None), (b"k3", b"v3", 13, 0, None),
                (b"k5", b"v5", 15, 3, None)],
        "dlq": [(b"k2", b"v2", 12, 2, [("error", b"bad")])],
    }
    assert keep.tolist() == [False, True, False, False, True, False]
    none, keep = sinks.split(["rep"], [b"k"], [b"v"], [1], [0], None)
    assert none == {} and keep.tolist() == [True]


def test_each_writer_gets_its_own_topics_in_one_call_and_the_figures_are_counted(monkeypatch):
    monkeypatch.setattr(task_sinks, "task_micro_batch", lambda: (7, "run-1", 0))
    a, b = RecordingWriter(), RecordingWriter()
    sinks = TaskSinks([(a, ["out", "out-changelog"]), (b, ["other"])])
    sinks.open(["0_0", "0_2"])
    metrics = Metrics()
    now = 1_000_000
    sinks.write("0_2", {"out": TopicRecords([now], [[(b"k", b"v", now, 0, None)]])},
                {"out-changelog": TopicRecords([now], [[(b"k", b"c", now, 2, None)]])},
                metrics)
    sinks.close("0_2")
    sinks.close_all()
    assert a.calls == [
        ("open", 7, "run-1", "0_0"), ("open", 7, "run-1", "0_2"),
        ("write", 7, "run-1", "0_2", {"out": [(b"k", b"v", now, 0, None)],
                                      "out-changelog": [(b"k", b"c", now, 2, None)]}),
        ("close", "0_2"), ("close_tasks",),
    ]
    assert ("write",) not in {c[:1] for c in b.calls}  # nothing of its topics
    assert metrics.counters["sink.records.written"] == 2
    assert metrics.counters["e2e-latency-count:out"] == 1  # records only, not changelogs


def test_only_stages_that_may_write_the_topics_get_the_sinks():
    sinks = TaskSinks([(RecordingWriter(), ["out", "counts-changelog"])])
    changelogs = {"counts": "counts-changelog"}
    assert sinks.for_stage(Sub(["rep"]), changelogs, None, False) is None
    assert sinks.for_stage(Sub(["out"]), changelogs, None, False) is sinks
    assert sinks.for_stage(Sub([], ["counts"]), changelogs, None, False) is sinks
    assert sinks.for_stage(Sub(["rep"]), changelogs, None, True) is sinks  # an extractor's choice
    dead = TaskSinks([(RecordingWriter(), ["dlq"])])
    assert dead.for_stage(Sub(["rep"]), {}, "dlq", False) is dead
    assert dead.for_stage(Sub(["rep"]), {}, None, False) is None


def test_a_topics_rows_are_made_a_chunk_at_a_time_as_the_writer_takes_them(monkeypatch):
    monkeypatch.setattr(task_sinks, "CHUNK", 2)
    made = []

    def make(start, stop):
        made.append((start, stop))
        return [(b"k%d" % i, b"v", i, 0, None) for i in range(start, stop)]

    chunks = chunked(5, make)
    assert made == []  # nothing before the writer asks
    assert [len(chunk) for chunk in chunks] == [2, 2, 1]
    assert made == [(0, 2), (2, 4), (4, 5)]
    sinks = TaskSinks([(RecordingWriter(), ["out"])])
    written, _ = sinks.split(["out"] * 5, [b"k"] * 5, [b"v"] * 5, list(range(5)), [0] * 5, None)
    assert [len(chunk) for chunk in written["out"].chunks] == [2, 2, 1]
    assert len(written["out"]) == 5


def test_a_task_writing_its_batch_in_parts_ends_each_writer_it_began_with_a_final_write(
        monkeypatch):
    monkeypatch.setattr(task_sinks, "task_micro_batch", lambda: (3, "run-2", 0))
    a, b = RecordingWriter(), RecordingWriter()
    sinks = TaskSinks([(a, ["out"]), (b, ["other"])])
    metrics = Metrics()
    with sinks.running("0_1"):
        sinks.write("0_1", {"out": TopicRecords([5], [[(b"k", b"v", 5, 1, None)]])}, {},
                    metrics, final=False)
        sinks.write("0_1", {}, {}, metrics)  # the last part: nothing more of "out"
    assert [c[0] for c in a.calls] == ["open", "send", "write", "close"]
    assert a.calls[2][4] == {}
    assert [c[0] for c in b.calls] == ["open", "close"]  # never begun: nothing to end
    assert metrics.counters["sink.records.written"] == 1
    # a task that runs its batch again forgets what it sent; a writer it never sent to is
    # left alone
    with sinks.running("0_1"):
        sinks.write("0_1", {"out": TopicRecords([5], [[(b"k", b"v", 5, 1, None)]])}, {},
                    metrics, final=False)
        sinks.abort("0_1")
        sinks.write("0_1", {}, {}, metrics)
    assert [c[0] for c in a.calls[4:]] == ["open", "send", "abort", "close"]
    assert "abort" not in {c[0] for c in b.calls}
