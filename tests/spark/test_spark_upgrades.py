"""Upgrades and topology changes under an existing checkpoint (issue 41): the layout the state
was written with is in the checkpoint's ``app.json``; a checkpoint resumes across a store added
or removed (as Kafka Streams: the new store starts empty, the old state stays unused) and is
refused at ``start()``, naming the change, when the state format, a store's kind or sub-topology,
the task count or the bucket count changed."""

from __future__ import annotations

import json
import logging
import os

import pytest
from spark_harness import run_through

from kspark import Materialized, StreamsBuilder, TimeWindows, io, serdes
from kspark.errors import CheckpointLayoutError
from kspark.spark import StreamsApp
from kspark.spark.internals.layout import layout_changes

pytestmark = pytest.mark.spark

S, L = serdes.String(), serdes.Long()


def _counts(kind: str = "key-value", extra_store: bool = False, rekeyed: bool = False):
    builder = StreamsBuilder()
    stream = builder.stream("clicks", S, S)
    if rekeyed:  # a repartition first: the count moves to a second sub-topology
        stream = stream.select_key(lambda k, v: k).repartition()
    grouped = stream.group_by_key()
    if kind == "window":
        (grouped.windowed_by(TimeWindows.of_size_with_no_grace(1_000_000))
         .count(Materialized("counts")).to_stream()
         .map(lambda k, v: (k.key, v)).to("out", S, L))
    else:
        grouped.count(Materialized("counts")).to_stream().to("out", S, L)
    if extra_store:
        grouped.reduce(lambda a, b: b, Materialized("last")).to_stream().to("last", S, S)
    return builder.build()


def _records(start: int, n: int) -> list[tuple[str, str, int]]:
    return [(f"u{i % 5}", f"p{i}", 1_000 + i) for i in range(start, start + n)]


def _app(spark, checkpoint, topology, source, config=None):
    topics = {"clicks": source, "out": io.memory(S, L)}
    if "last" in topology.external_sink_topics():
        topics["last"] = io.memory(S, S)
    return StreamsApp(topology, "upgrade", topics, spark=spark, checkpoint_dir=checkpoint,
                      config=config)


@pytest.fixture
def first_run(spark, app_dir):
    """The counts app run once over 40 clicks: its checkpoint and source."""
    source = io.memory(S, S, partitions=2)
    source.send_all(_records(0, 40), per_file=20)
    checkpoint = os.path.join(app_dir, "ck")
    run_through(_app(spark, checkpoint, _counts(), source))
    return checkpoint, source


def test_a_store_added_starts_empty_and_the_kept_state_counts_on(spark, first_run, caplog):
    checkpoint, source = first_run
    source.send_all(_records(40, 10))
    with caplog.at_level(logging.WARNING, logger="kspark.app"):
        app = run_through(_app(spark, checkpoint, _counts(extra_store=True), source))
    assert "store 'last' is new: it starts empty" in caplog.text
    final = {}
    for key, count, _ts in app.topics["out"].records():
        final[key] = count
    assert final == {f"u{u}": 10 for u in range(5)}  # 8 before the change, 2 after
    assert sorted(app.topics["last"].records())[-1][1] == "p49"
    # and back: the store removed, its state unused
    source.send_all(_records(50, 5))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kspark.app"):
        app = run_through(_app(spark, checkpoint, _counts(), source))
    assert "store 'last' is no longer in the topology: its state stays unused" in caplog.text
    assert {k: c for k, c, _ in app.topics["out"].records()} == {f"u{u}": 11 for u in range(5)}


@pytest.mark.parametrize("change, topology, partitions, config, named", [
    ("kind", _counts("window"), 2, None,
     "store 'counts' was a key-value store and is now a window store"),
    ("sub-topology", _counts(rekeyed=True), 2, None,
     "it has 1 sub-topology and the topology now has 2 (one was added or removed; Spark keeps "
     "state per stateful operator, one per sub-topology); store 'counts' was in sub-topology 0 "
     "(Spark state operator 0) and is now in sub-topology 1 (operator 0)"),
    ("partitions", _counts(), 3, None,
     "it has 2 tasks per sub-topology and the application now has 3 (the partition count of "
     "topics clicks changed)"),
    ("buckets", _counts(), 2, {"state.buckets": 7},
     "its state is in 16 buckets per store and state.buckets is now 7"),
])
def test_a_change_the_state_cannot_follow_is_refused_naming_it(
        spark, first_run, change, topology, partitions, config, named):
    checkpoint, source = first_run
    if partitions != 2:
        source = io.memory(S, S, partitions=partitions)
        source.send_all(_records(0, 40), per_file=20)
    app = _app(spark, checkpoint, topology, source, config)
    with pytest.raises(CheckpointLayoutError) as err:
        app.start()
    assert app.query is None
    message = str(err.value)
    assert message.startswith(f"application 'upgrade' cannot resume checkpoint {checkpoint}: ")
    assert named in message, message
    assert "Start it with a new checkpoint_dir" in message


def test_a_newer_state_format_is_refused_naming_both_versions(spark, first_run):
    checkpoint, source = first_run
    path = os.path.join(checkpoint, "app.json")
    with open(path) as f:
        info = json.load(f)
    info.update(format=info["format"] + 1, kspark_version="9.9.9")
    with open(path, "w") as f:
        json.dump(info, f)
    app = _app(spark, checkpoint, _counts(), source)
    with pytest.raises(CheckpointLayoutError, match=(
            r"its state was written by kspark 9\.9\.9 \(state format 4\); this is kspark "
            r"\S+ \(state format 3\), which reads state formats 2 and 3")):
        app.start()


def test_a_checkpoint_of_the_version_before_resumes(spark, first_run):
    """kspark 0.1 wrote app.json without its version: same state format, it resumes."""
    checkpoint, source = first_run
    path = os.path.join(checkpoint, "app.json")
    with open(path) as f:
        info = json.load(f)
    del info["kspark_version"], info["topics"]
    with open(path, "w") as f:
        json.dump(info, f)
    refused, _notes = layout_changes(info, info | {"kspark_version": "x", "topics": []})
    assert refused == []
    source.send_all(_records(40, 5))
    app = run_through(_app(spark, checkpoint, _counts(), source))
    assert {k: c for k, c, _ in app.topics["out"].records()} == {f"u{u}": 9 for u in range(5)}


FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "checkpoint-0.1.0")


def test_the_checkpoint_kspark_0_1_0_wrote_resumes(spark, app_dir):
    """A checkpoint made by kspark 0.1.0 (state format 2), committed to the tests: the counts
    app over 40 clicks, its source files beside it. Spark keeps the state schema's absolute
    path in the operator metadata: the copy puts its own there (and drops that file's
    checksum)."""
    import shutil

    from kspark.io.memory import MemoryTopic

    here = os.path.join(app_dir, "fixture")
    shutil.copytree(FIXTURE, here)
    for root, _dirs, files in os.walk(here):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".crc") or name.endswith(".sst") or name.endswith(".zip"):
                continue
            with open(path, "rb") as f:
                data = f.read()
            if b"@FIXTURE@" in data:
                with open(path, "wb") as f:
                    f.write(data.replace(b"@FIXTURE@", here.encode()))
    with open(os.path.join(here, "checkpoint", "app.json")) as f:
        assert json.load(f)["kspark_version"] == "0.1.0"
    source = MemoryTopic(S, S, partitions=2, path=os.path.join(here, "clicks"))
    # the next file after the fixture's two, as the memory topic wrote them
    with open(os.path.join(here, "clicks", "in-000000000002.jsonl"), "w") as f:
        for key, value, ts in _records(40, 10):
            part = 0 if source.partitions == 1 else _partition(key, source.partitions)
            f.write(json.dumps({"key": key, "value": value, "timestamp": ts,
                                "partition": part}) + "\n")
    app = run_through(_app(spark, os.path.join(here, "checkpoint"), _counts(), source))
    assert app.metrics()["process-total"] == 10  # the fixture's 40 were done before
    assert {k: c for k, c, _ in app.topics["out"].records()} == {f"u{u}": 10 for u in range(5)}


def _partition(key: str, partitions: int) -> int:
    from kspark.hashing import kafka_partition

    return kafka_partition(key.encode(), partitions)
