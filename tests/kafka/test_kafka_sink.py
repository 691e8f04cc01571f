"""The transactional writer on Apache Kafka (no Spark): a batch is one transaction, written once;
an interrupted transaction is never seen by read_committed consumers; a second instance fences
the first; a delivery error names the topic."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka_util import BASE_MS, consume, create

from kspark.errors import StreamsError
from kspark.kafka.admin import TopicError
from kspark.kafka.reader import read_to_end
from kspark.kafka.sink import TransactionalWriter, marker_topic, transactional_id

pytestmark = pytest.mark.kafka


def _batch(batch_id, n=20, partitions=2):
    return [
        (f"k{i}".encode(), f"b{batch_id}-{i}".encode(), BASE_MS + i, i % partitions, None)
        for i in range(n)
    ]


def _values(bootstrap, topic):
    """The values a read_committed consumer sees."""
    return sorted(m.value() for m in read_to_end(bootstrap, topic))


def _uncommitted_values(bootstrap, topic, partitions=2):
    """Every value in the log, up to the high watermark (read_uncommitted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t",
                         "isolation.level": "read_uncommitted", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, ended = [], set()
    while len(ended) < partitions:
        m = consumer.poll(10)
        assert m is not None, "no end of partition within 10 s"
        if m.error() is None:
            values.append(m.value())
        else:
            ended.add(m.partition())
    consumer.close()
    return sorted(values)


@pytest.fixture
def out(bootstrap, topic):
    create(bootstrap, topic, 2)
    create(bootstrap, marker_topic(topic), 1, **{"cleanup.policy": "compact"})
    return topic


def _writer(bootstrap, app):
    writer = TransactionalWriter(bootstrap, app)
    writer.open()
    return writer


def _write(writer, topic, run, batch_id, rows):
    writer.stage(topic, rows)
    return writer.commit(run, batch_id)


def test_each_batch_is_one_transaction_and_a_replay_is_skipped(bootstrap, out):
    writer = _writer(bootstrap, out)
    assert _write(writer, out, "run-1", 0, _batch(0)) == 20
    assert _write(writer, out, "run-1", 1, _batch(1)) == 20
    assert _write(writer, out, "run-1", 1, _batch(1)) == 0  # Spark replays batch 1
    writer.close()
    # a restarted writer knows what was committed before it
    again = _writer(bootstrap, out)
    assert again.last_marker() == {"run": "run-1", "batch": 1}
    assert _write(again, out, "run-1", 0, _batch(0)) == 0
    assert _write(again, out, "run-1", 2, _batch(2)) == 20
    again.close()
    values = _values(bootstrap, out)
    assert len(values) == 60 and len(set(values)) == 60
    # each commit left a transaction marker after its records: offsets have gaps
    offsets = [m.offset() for m in consume(bootstrap, out) if m.partition() == 0]
    assert offsets != list(range(len(offsets)))


def test_a_new_run_writes_its_batches_again(bootstrap, out):
    writer = _writer(bootstrap, out)
    _write(writer, out, "run-1", 0, _batch(0))
    assert _write(writer, out, "run-2", 0, _batch(0)) == 20  # a fresh checkpoint: a new query
    writer.close()
    assert len(_values(bootstrap, out)) == 40


def test_an_interrupted_transaction_is_invisible_and_the_replay_writes_it_once(bootstrap, out):
    writer = _writer(bootstrap, out)
    _write(writer, out, "run-1", 0, _batch(0))
    writer.close()
    # a crashed instance: its transaction of batch 1 was sent, never committed
    crashed = Producer({"bootstrap.servers": bootstrap,
                        "transactional.id": transactional_id(out)})
    crashed.init_transactions(30)
    crashed.begin_transaction()
    for key, value, ts, part, _ in _batch(1):
        crashed.produce(out, value, key, partition=part, timestamp=ts)
    assert crashed.flush(30) == 0
    # the records are in the log (read_uncommitted sees them), not in the committed view
    assert b"b1-0" in _uncommitted_values(bootstrap, out)
    assert b"b1-0" not in _values(bootstrap, out)
    # the restarted instance fences the crashed one, aborting its transaction, and replays
    restarted = _writer(bootstrap, out)
    assert restarted.last_marker()["batch"] == 0
    assert _write(restarted, out, "run-1", 1, _batch(1)) == 20
    restarted.close()
    values = _values(bootstrap, out)
    assert len(values) == 40 and len(set(values)) == 40


def test_a_second_instance_fences_the_first(bootstrap, out):
    first = _writer(bootstrap, out)
    _write(first, out, "run-1", 0, _batch(0))
    second = _writer(bootstrap, out)  # a duplicate instance on the same transactional id
    with pytest.raises(StreamsError, match=r"another instance of application .* took over"):
        _write(first, out, "run-1", 1, _batch(1))
    assert _write(second, out, "run-1", 1, _batch(1)) == 20
    second.close()
    first.close()
    values = _values(bootstrap, out)
    assert len(values) == 40 and len(set(values)) == 40


def test_a_delivery_error_aborts_the_batch_and_names_the_topic(bootstrap, topic):
    create(bootstrap, topic, 2, **{"max.message.bytes": "1024"})
    create(bootstrap, marker_topic(topic), 1, **{"cleanup.policy": "compact"})
    writer = _writer(bootstrap, topic)
    rows = [*_batch(0, 5), (b"big", b"x" * 4000, BASE_MS, 0, None)]
    with pytest.raises(StreamsError) as err:
        _write(writer, topic, "run-1", 0, rows)
    writer.close()
    assert f"topic {topic!r} partition 0" in str(err.value)
    assert "aborted" in str(err.value)
    assert _values(bootstrap, topic) == []  # none of the batch is visible


def test_the_marker_is_found_behind_many_markers_of_other_writers(bootstrap, out):
    """The marker search reads the topic backwards in growing spans with one consumer: a
    writer's marker behind 300 markers of other writers (and their transaction markers) is
    found, and an open transaction of another writer does not hold the search up."""
    mine = TransactionalWriter(bootstrap, out, partition=0)
    mine.open()
    assert _write(mine, out, "run-1", 7, _batch(7, n=2)) == 2
    mine.close()
    others = [TransactionalWriter(bootstrap, out, partition=p) for p in range(1, 4)]
    for w in others:
        w.open()
    for batch_id in range(100):
        for w in others:
            _write(w, out, "run-1", batch_id, _batch(batch_id, n=1))
    for w in others:
        w.close()
    # another writer's transaction left open on the marker topic
    open_txn = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": transactional_id(out, 9)})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(marker_topic(out), b'{"run": "x", "batch": 1}', transactional_id(out, 9))
    assert open_txn.flush(30) == 0
    again = TransactionalWriter(bootstrap, out, partition=0)
    assert again.last_marker() == {"run": "run-1", "batch": 7}
    assert TransactionalWriter(bootstrap, out, partition=5).last_marker() == {
        "run": None, "batch": -1}
    open_txn.abort_transaction(30)


def test_a_missing_marker_topic_is_named(bootstrap, topic):
    create(bootstrap, topic, 2)
    writer = TransactionalWriter(bootstrap, topic)
    with pytest.raises(TopicError, match=f"{marker_topic(topic)}.*does not exist"):
        writer.last_marker()


def test_a_batch_written_in_chunks_is_one_transaction_taken_chunk_by_chunk(bootstrap, out):
    rows = _batch(0, n=50)
    taken = []

    def chunks():
        for start in range(0, len(rows), 20):
            taken.append(start)
            yield rows[start:start + 20]

    writer = _writer(bootstrap, out)
    assert writer.write("run-1", 0, {out: chunks()}) == 50
    assert taken == [0, 20, 40]
    assert writer.write("run-1", 0, {out: chunks()}) == 0  # a replay takes none
    assert taken == [0, 20, 40]
    writer.close()
    assert _values(bootstrap, out) == sorted(value for _, value, *_ in rows)


def test_a_marker_read_whose_metadata_request_fails_is_asked_again_then_named():
    """A broker down while a writer reads its marker: the marker topic's metadata request fails
    with librdkafka's transport error, which is asked again (a restarting broker answers the
    next one) and, once the time is up, named with the topic and the writer."""
    from net_util import free_port

    from kspark.kafka.sink import last_marker

    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(TopicError) as caught:
        last_marker(bootstrap, "app-kspark-sink-batches", "app-kspark-sink-0", timeout=1.0)
    message = str(caught.value)
    assert "'app-kspark-sink-batches'" in message and "'app-kspark-sink-0'" in message
    assert "metadata" in message and caught.value.__cause__ is not None


def test_a_batch_sent_in_parts_is_seen_only_when_committed_and_aborted_parts_never(bootstrap,
                                                                                  out):
    rows = _batch(0, n=30)
    writer = _writer(bootstrap, out)
    assert writer.send("run-1", 0, {out: [rows[:10]]}) == 10
    assert writer.send("run-1", 0, {out: [rows[10:20]]}) == 10
    # sent, in the log, not committed: a read_committed consumer sees none of them yet
    assert len(_uncommitted_values(bootstrap, out)) == 20
    assert _values(bootstrap, out) == []
    writer.abort()  # the task runs its batch again from the start
    assert writer.send("run-1", 0, {out: [rows[:15]]}) == 15
    assert _write(writer, out, "run-1", 0, rows[15:]) == 15  # the rest, and the commit
    assert writer.send("run-1", 0, {out: [rows]}) == 0  # a replay of the batch sends nothing
    assert _write(writer, out, "run-1", 0, rows) == 0
    writer.close()
    assert _values(bootstrap, out) == sorted(value for _, value, *_ in rows)
