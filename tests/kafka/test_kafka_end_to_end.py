"""The sessions app from a Kafka topic to Kafka topics, against the embedded broker: equal to the
test driver, exactly once across a kill and restart, resuming from the checkpoint's offsets, and
bad input (docs/semantics.md §8)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from kafka_app_process import sessions_app
from kafka_util import BASE_MS, consume, create, produce
from kafka_util import driver_outputs as _driver_outputs
from kafka_util import kafka_outputs as _kafka_outputs
from kafka_util import sessions_clicks as _clicks

from kspark.hashing import kafka_partition
from kspark.kafka import TopicError
from kspark.kafka.sink import TransactionalWriter, marker_topic
from kspark.spark.internals.batch_output import DRIVER_RECORDS

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
HERE = os.path.dirname(__file__)


@pytest.fixture
def prefix(topic):
    """This test's prefix for Kafka topic names and the app id (one broker for the run)."""
    return f"{topic}."


@pytest.mark.parametrize(("in_stage", "most"), [("true", None), ("false", None), ("true", 13)])
def test_sessions_topic_to_topic_equal_the_test_driver(spark, app_dir, bootstrap, prefix,
                                                       in_stage, most):
    """Read and written in the stages (each partition's records from Kafka to the task that
    processes them, each task's output to Kafka in a transaction of its own right after it ran)
    or not (Spark's source reading the records, the query's last stage writing them); with
    ``most``, each task runs its batch 13 records at a time and writes each slice's sessions
    into its open transaction as the slice ends."""
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = _clicks(800, seed=3)
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    assert len(set(parts)) == 4
    app = sessions_app(bootstrap, prefix, os.path.join(app_dir, "ck"), 300, spark=spark,
                       config={"spark.kspark.kafka.read.in.stage": in_stage,
                               "spark.kspark.sink.in.stage": in_stage,
                               "task.batch.max.records": most})
    app.start()
    try:
        app.process_all_available()
        metrics = app.metrics()
        source_rows = sum(p["numInputRows"] for p in app.query.recentProgress)
    finally:
        app.stop()
    # read in the stages, Spark's source gives one range row per partition and batch; read in
    # a stage of its own, the records themselves
    assert source_rows == 800 if in_stage == "false" else 4 <= source_rows <= 4 * 4
    driver_metrics: dict[str, int] = {}
    expected = _driver_outputs(clicks, parts, driver_metrics)
    assert len(expected["session-counts"]) > 20
    assert _kafka_outputs(bootstrap, prefix) == expected
    assert metrics["batches"] >= 3 and metrics["process-total"] == 800
    # the generator's late clicks, dropped and counted as on the test driver
    assert metrics["dropped-records-expired-window"] == driver_metrics[
        "dropped-records-expired-window"] > 0
    # output topics are created with the input's partitions; a session goes to its user's
    # partition, as Kafka Streams' WindowedStreamPartitioner sends a windowed key (by the inner
    # key: the serialized key without its 16 window bytes)
    messages = consume(bootstrap, f"{prefix}session-counts")
    assert {m.partition() for m in messages} == {0, 1, 2, 3}
    user_partition = {user: part for (user, _, _), part in zip(clicks, parts)}
    assert all(m.partition() == user_partition[m.key()[:-16].decode()] for m in messages)
    assert all(m.partition() == kafka_partition(m.key()[:-16], 4) for m in messages)
    # the transactions' writers: one per task (sub-topology 0, tasks 0 to 3), else one per
    # Spark partition of the last stage
    writers = {m.key().decode().rsplit("-", 1)[1]
               for m in consume(bootstrap, marker_topic(f"{prefix}app"))}
    assert writers == ({"0_0", "0_1", "0_2", "0_3"} if in_stage == "true"
                       else {str(p) for p in range(app.spark_partitions)})
    assert metrics["sink.records.written"] == sum(map(len, expected.values()))
    assert metrics[DRIVER_RECORDS] == 0


def test_killed_and_restarted_app_loses_and_duplicates_nothing(spark, app_dir, bootstrap,
                                                               prefix):
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = _clicks(3000, seed=8)  # 15 micro-batches: the kill lands before the last
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    checkpoint = os.path.join(app_dir, "ck")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "kafka_app_process.py"), bootstrap, prefix,
         checkpoint, "200"],
        cwd=HERE, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    markers = TransactionalWriter(bootstrap, f"{prefix}app")
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        try:
            if markers.app_marker()["batch"] >= 0:
                break
        except TopicError:
            pass  # the marker topic is created at start
        time.sleep(0.2)
    time.sleep(random.Random(4).uniform(0.0, 1.5))
    assert proc.poll() is None, "the first run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert consume(bootstrap, f"{prefix}session-counts")  # some batches were written

    # the restart may replay the batch that was written but not yet committed by Spark
    app = sessions_app(bootstrap, prefix, checkpoint, 200, spark=spark)
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    got = _kafka_outputs(bootstrap, prefix)
    for topic, rows in got.items():
        keys = Counter(repr(k) for k, _, _ in rows)
        assert max(keys.values()) == 1, f"{topic}: a session written twice"
    assert got == _driver_outputs(clicks, parts)


def test_a_restart_resumes_from_the_checkpoint_offsets(spark, app_dir, bootstrap, prefix):
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = _clicks(800, seed=5)
    half = 500
    parts = produce(bootstrap, f"{prefix}clicks", clicks[:half])
    checkpoint = os.path.join(app_dir, "ck")
    app = sessions_app(bootstrap, prefix, checkpoint, spark=spark)
    app.start()
    try:
        app.process_all_available()
        end = json.loads(app.query.lastProgress["sources"][0]["endOffset"])
    finally:
        app.stop()
    parts += produce(bootstrap, f"{prefix}clicks", clicks[half:])
    # "latest" applies to a query without a checkpoint only: this one resumes where it stopped
    again = sessions_app(bootstrap, prefix, checkpoint, spark=spark, starting_offsets="latest")
    again.start()
    try:
        again.process_all_available()
        progress = [p for p in again.query.recentProgress if p["numInputRows"]]
    finally:
        again.stop()
    assert json.loads(progress[0]["sources"][0]["startOffset"]) == end
    # the offsets the restarted query planned cover exactly the records produced since (the
    # stages read them: Spark's numInputRows counts one range row per partition and batch)
    planned = sum(
        int(stop) - int(json.loads(p["sources"][0]["startOffset"])[topic][part])
        for p in progress
        for topic, parts in json.loads(p["sources"][0]["endOffset"]).items()
        if not topic.startswith("@")  # "@latest": the partitions' ends when it was taken
        for part, stop in parts.items()
    )
    assert planned == len(clicks) - half
    assert again.metrics()["process-total"] == len(clicks) - half
    assert _kafka_outputs(bootstrap, prefix) == _driver_outputs(clicks, parts)


def test_malformed_json_stops_the_app_naming_topic_partition_offset(spark, app_dir, bootstrap,
                                                                   prefix):
    clicks = f"{prefix}clicks"
    create(bootstrap, clicks, 4)
    produce(bootstrap, clicks, [("alice", {"page": "/"}, BASE_MS), ("bob", {"page": "/"}, BASE_MS)])
    bad_part = produce(bootstrap, clicks, [("carol", b"{not json", BASE_MS + 2)], raw=True)[0]
    bad_offset = next(m.offset() for m in consume(bootstrap, clicks) if m.value() == b"{not json")
    app = sessions_app(bootstrap, prefix, os.path.join(app_dir, "ck"), spark=spark)
    app.start()
    try:
        with pytest.raises(Exception) as err:
            app.process_all_available()
    finally:
        app.stop()
    # the topology's name for the topic, the Kafka partition and offset
    assert (f"Deserialization error at topic 'clicks' partition {bad_part} offset {bad_offset}"
            in str(err.value))

    config = {"default.deserialization.exception.handler": "log_and_continue",
              "errors.dead.letter.queue.topic.name": "clicks-dead"}
    lenient = sessions_app(bootstrap, prefix, os.path.join(app_dir, "ck2"), spark=spark,
                           config=config)
    lenient.start()
    try:
        lenient.process_all_available()
    finally:
        lenient.stop()
    assert lenient.metrics()["dropped-records-deserialization-error"] == 1
    assert lenient.metrics()["process-total"] == 2
    assert [m.value() for m in consume(bootstrap, f"{prefix}clicks-dead")] == [b"{not json"]


def test_a_missing_source_topic_is_named_at_start(spark, app_dir, bootstrap, prefix):
    app = sessions_app(bootstrap, prefix, os.path.join(app_dir, "ck"), spark=spark)
    with pytest.raises(TopicError) as err:
        app.start()
    assert f"Kafka topic '{prefix}clicks' does not exist" in str(err.value)
    assert f"source topic 'clicks' of application '{prefix}app'" in str(err.value)


def test_an_unreachable_broker_at_start_is_named(spark, app_dir, prefix):
    from kspark.kafka.admin import KafkaUnreachableError
    from kspark.kafka.broker import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    app = sessions_app(address, prefix, os.path.join(app_dir, "ck"), spark=spark)
    with pytest.raises(KafkaUnreachableError) as err:
        app.start()
    # named by the connection check, not after the client's metadata timeout
    assert str(err.value).startswith(f"cannot reach Kafka at {address}: {address}: ")
    assert app.query is None  # no query was started
