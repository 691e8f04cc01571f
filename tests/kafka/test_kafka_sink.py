"""The Kafka sink writes each micro-batch once: replays are skipped, and an interrupted batch is
completed without duplicates (no Spark)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from kafka_util import BASE_MS, consume, create

from kspark.errors import StreamsError
from kspark.kafka.sink import HEADER, BatchSink

pytestmark = pytest.mark.kafka


def _batch(batch_id, n=20, partitions=2):
    return [
        (f"k{i}".encode(), f"b{batch_id}-{i}".encode(), BASE_MS + i, i % partitions)
        for i in range(n)
    ]


def _sink(bootstrap, topic):
    return BatchSink(bootstrap, topic, f"{topic}-markers", "out")


def _values(bootstrap, topic):
    return sorted(m.value() for m in consume(bootstrap, topic))


@pytest.fixture
def out(bootstrap, topic):
    create(bootstrap, topic, 2)
    create(bootstrap, f"{topic}-markers", 1, **{"cleanup.policy": "compact"})
    return topic


def test_each_batch_is_written_once_and_a_replay_is_skipped(bootstrap, out):
    sink = _sink(bootstrap, out)
    assert sink.write("run-a", 0, _batch(0)) == 20
    assert sink.write("run-a", 1, _batch(1)) == 20
    assert sink.write("run-a", 1, _batch(1)) == 0  # replayed by Spark
    restarted = _sink(bootstrap, out)  # a new process: learns the last batch from Kafka
    assert restarted.write("run-a", 0, _batch(0)) == 0
    assert restarted.write("run-a", 1, _batch(1)) == 0
    assert restarted.write("run-a", 2, _batch(2)) == 20
    expected = sorted(v for b in range(3) for _, v, _, _ in _batch(b))
    assert _values(bootstrap, out) == expected
    messages = consume(bootstrap, out)
    assert all(m.partition() == int(m.key()[1:]) % 2 for m in messages)
    assert {m.timestamp()[1] for m in messages} == {BASE_MS + i for i in range(20)}
    marker = restarted.last_marker()
    assert (marker["run"], marker["batch"]) == ("run-a", 2)
    assert marker["ends"] == {"0": 30, "1": 30}


def test_a_new_run_writes_its_batches_again(bootstrap, out):
    _sink(bootstrap, out).write("run-a", 0, _batch(0))
    assert _sink(bootstrap, out).write("run-b", 0, _batch(0)) == 20  # fresh checkpoint
    assert len(consume(bootstrap, out)) == 40


def test_an_interrupted_batch_is_completed_without_duplicates(bootstrap, out):
    sink = _sink(bootstrap, out)
    sink.write("run-a", 0, _batch(0))
    # a crashed attempt at batch 1 wrote 7 of its records (tagged), but no marker
    crashed = Producer({"bootstrap.servers": bootstrap})
    for key, value, ts, part in _batch(1)[:7]:
        crashed.produce(out, value, key, partition=part, timestamp=ts,
                        headers=[(HEADER, b"run-a/1/out")])
    crashed.flush(10)
    restarted = _sink(bootstrap, out)
    assert restarted.write("run-a", 1, _batch(1)) == 13
    assert restarted.recovered_records == 7
    values = _values(bootstrap, out)
    assert len(values) == len(set(values)) == 40


def test_a_delivery_error_raises_with_the_topic_partition_and_message(bootstrap, out):
    with pytest.raises(StreamsError) as err:
        _sink(bootstrap, out).write("run-a", 0, [(b"k", b"v", BASE_MS, 7)])
    text = str(err.value)
    assert f"topic {out!r} partition 7" in text and "Unknown partition" in text
    assert json.loads(consume(bootstrap, f"{out}-markers")[-1].value())["batch"] == -1
