"""Exactly once from Kafka to Kafka under failures: the sessions app (its own process, see
kafka_app_process.py) killed between a batch's Kafka commit and Spark's, and a zombie instance
fenced by the instance that took over its transactional id (kills at random moments while
clicks keep coming: test_kafka_soak.py). Each time the read_committed output must equal the test
driver's on the same records: nothing lost, nothing written twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from kafka_app_process import sessions_app
from kafka_util import (
    create,
    driver_outputs,
    kafka_outputs,
    produce,
    sessions_clicks,
)

from kspark.kafka import TopicError
from kspark.kafka.sink import TransactionalWriter

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
HERE = os.path.dirname(__file__)
APP = os.path.join(HERE, "kafka_app_process.py")


@pytest.fixture
def prefix(topic):
    """This test's prefix for Kafka topic names and the app id (one broker for the run)."""
    return f"{topic}."


def _a_day_ago():
    """Timestamps of the clicks start here: recent enough that the broker's retention (7 days)
    deletes none of them nor the outputs while the test runs."""
    return (int(time.time()) - 86_400) * 1000


def _spawn(bootstrap, prefix, checkpoint, per_trigger, log, *options):
    """The sessions app in a process of its own (its own process group, to kill it whole)."""
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, APP, bootstrap, prefix, checkpoint, str(per_trigger), *options],
            cwd=HERE, start_new_session=True, stdout=subprocess.PIPE, stderr=err, text=True,
        )
    proc.log = log
    return proc


def _stopped(proc):
    """Why the app's process stopped: its output and the end of its log."""
    with open(proc.log, errors="replace") as f:
        tail = "".join(f.readlines()[-15:])
    return f"the app stopped ({proc.poll()}): {proc.stdout.read()}\n... {tail}"


def _last_batch(markers):
    """The last batch committed to Kafka (-1 before the first, or before the app started)."""
    try:
        return markers.app_marker()["batch"]
    except TopicError:  # the marker topic is created at start
        return -1


def _wait_for_line(proc, text, timeout=90.0):
    """Wait until the process prints a line containing ``text``; returns its output so far."""
    lines = []
    done = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if text in line:
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    done.wait(timeout)
    if lines and text in lines[-1]:
        return "".join(lines)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    raise AssertionError(f"the app printed no {text!r}: {''.join(lines)!r}; {_stopped(proc)}")


def _ends(bootstrap, topic):
    """The end offsets of the topic's partitions for read_uncommitted and read_committed
    readers (the high watermarks, the last stable offsets)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(4)}
    return {
        name: [f.result().offset for f in admin.list_offsets(tps, isolation_level=level).values()]
        for name, level in (("uncommitted", IsolationLevel.READ_UNCOMMITTED),
                            ("committed", IsolationLevel.READ_COMMITTED))
    }


def _lost_and_duplicated(got, expected):
    """Records expected but not written, and records written more often than expected."""
    lost = dup = 0
    for topic, rows in expected.items():
        want, have = Counter(map(repr, rows)), Counter(map(repr, got[topic]))
        lost += sum((want - have).values())
        dup += sum((have - want).values())
    return lost, dup


def _assert_exactly_once(bootstrap, prefix, clicks, parts):
    got, expected = kafka_outputs(bootstrap, prefix), driver_outputs(clicks, parts)
    assert len(expected["session-counts"]) > 50
    lost, duplicated = _lost_and_duplicated(got, expected)
    assert (lost, duplicated) == (0, 0), (
        f"{lost} records lost, {duplicated} written twice (or not expected)")
    assert got == expected


@pytest.mark.parametrize("first", ["tasks", "partitions"])
def test_killed_after_the_kafka_commit_the_redone_batch_is_skipped(spark, app_dir, bootstrap,
                                                                     prefix, first):
    """The process dies (SIGKILL) right after a batch's Kafka transaction committed, before
    Spark recorded the batch in its checkpoint: the restart redoes the batch, with the same
    offsets, and writes nothing for it. The process that died wrote each task's records from
    its stage, or (``partitions``) each Spark partition's after the last stage, as kspark did
    before: the restarted app's task writers then take the last batch of their partition's."""
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(1000, seed=23, base_ms=_a_day_ago())
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    checkpoint = os.path.join(app_dir, "ck")
    options = ["--conf", "spark.kspark.sink.in.stage=false"] if first == "partitions" else []
    proc = _spawn(bootstrap, prefix, checkpoint, 100, os.path.join(app_dir, "app.log"),
                  "--die-after-batch", "2", *options)
    try:
        output = _wait_for_line(proc, "dying after batch")
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        proc.stdout.close()
    died = int(output.rsplit("dying after batch", 1)[1].split()[0])
    assert _last_batch(TransactionalWriter(bootstrap, f"{prefix}app")) == died

    app = sessions_app(bootstrap, prefix, checkpoint, 1000, spark=spark)
    app.start()
    try:
        app.process_all_available()
        first = min(p["batchId"] for p in app.query.recentProgress)
    finally:
        app.stop()
    # the partition that committed the batch before the kill skips it now
    assert first == died and app.metrics()["sink.transactions.skipped"] >= 1
    _assert_exactly_once(bootstrap, prefix, clicks, parts)


def test_a_zombie_instance_is_fenced_and_writes_nothing(spark, app_dir, bootstrap, prefix):
    """Instance 1 (a process) stalls in the middle of a batch's transaction: its records are
    sent, the commit not yet asked for (``--hold-batch``, which makes the timing deterministic).
    Instance 2, same application id and checkpoint directory, starts in this process: it takes
    over the transactional id, which aborts instance 1's open transaction. When instance 1 goes
    on, its commit fails with "took over" and it stops; instance 2 redoes the batch and runs to
    the end. Both share one checkpoint directory: instance 1 is stalled inside the batch, after
    its offsets and state were written, as a crashed instance would have left them."""
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(1200, seed=22, base_ms=_a_day_ago())
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    checkpoint = os.path.join(app_dir, "ck")
    release = os.path.join(app_dir, "release")
    first = _spawn(bootstrap, prefix, checkpoint, 100, os.path.join(app_dir, "app.log"),
                   "--hold-batch", "3", "--hold-file", release)
    try:
        output = _wait_for_line(first, "holding batch")
        held, _, _, writer_id = output.rsplit("holding batch", 1)[1].split()[:4]
        held = int(held)
        task = writer_id.rsplit("-", 1)[1]  # the task's: the stage writes its records
        assert task.startswith("0_")
        markers = TransactionalWriter(bootstrap, f"{prefix}app", partition=task)
        assert markers.transactional_id == writer_id
        committed = markers.last_marker()["batch"]
        assert 0 <= committed < held
        # the held transaction's records are on the broker, past the last stable offset
        ends = _ends(bootstrap, f"{prefix}session-counts")
        assert sum(ends["uncommitted"]) > sum(ends["committed"])

        # (the batch it redoes keeps its offsets, from the checkpoint; later ones may be larger)
        second = sessions_app(bootstrap, prefix, checkpoint, 1000, spark=spark)
        second.start()  # takes over the transactional id: instance 1 is fenced
        try:
            open(release, "w").close()
            first.wait(120)
            output += first.stdout.read()
            assert first.returncode == 1, output
            assert "failed: " in output and "took over the transactional id" in output, output
            assert f"batch {held}" in output
            second.process_all_available()
            # instance 2 redid the held batch: it was not committed by instance 1
            assert markers.last_marker()["batch"] >= held
            assert second.metrics()["sink.transactions.committed"] > 0
        finally:
            second.stop()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        first.stdout.close()
    _assert_exactly_once(bootstrap, prefix, clicks, parts)
