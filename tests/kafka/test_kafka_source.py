"""The ``kspark_kafka`` Spark source: native columns, offset ranges per trigger, starting
offsets, patterns, missing topics and data loss."""

from __future__ import annotations

import itertools
import json
import os

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka_util import BASE_MS, create, produce

from kspark.spark.internals.kafka_source import skipped_offsets

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NATIVE_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                  "headers"]


def _records(n, users=9):
    return [(f"u{i % users}", {"i": i}, BASE_MS + i) for i in range(n)]


def _start(spark, app_dir, bootstrap, name, **options):
    reader = spark.readStream.format("kspark_kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", os.path.join(app_dir, name))
        .start()
    )


def _start_collecting(spark, app_dir, bootstrap, name, rows, **options):
    """Like :func:`_start` but into ``rows`` with ``foreachBatch`` (recoverable from its
    checkpoint, unlike the memory sink)."""
    reader = spark.readStream.format("kspark_kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(lambda frame, _: rows.extend(frame.collect()))
        .option("checkpointLocation", os.path.join(app_dir, name))
        .start()
    )


def _rows(spark, name):
    return spark.sql(f"select * from {name}").collect()


def test_native_columns_and_offset_ranges_capped_per_trigger(spark, app_dir, bootstrap, topic):
    create(bootstrap, topic, 4)
    parts = produce(bootstrap, topic, _records(200))
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"with-headers", b"h", partition=1, timestamp=BASE_MS + 999,
                     headers=[("trace", b"abc"), ("n", b"1")])
    producer.flush(10)
    query = _start(spark, app_dir, bootstrap, "src_cols", subscribe=topic,
                   maxOffsetsPerTrigger="60")
    try:
        query.processAllAvailable()
        progress = query.recentProgress
    finally:
        query.stop()
    frame = spark.sql("select * from src_cols")
    assert frame.columns == NATIVE_COLUMNS
    assert [f.dataType.simpleString() for f in frame.schema.fields] == [
        "binary", "binary", "string", "int", "bigint", "timestamp", "int",
        "array<struct<key:string,value:binary>>"]
    rows = frame.collect()
    assert len(rows) == 201
    assert len({(r.partition, r.offset) for r in rows}) == 201
    by_value = {bytes(r.value): r for r in rows}
    for i, part in enumerate(parts):
        row = by_value[json.dumps({"i": i}).encode()]
        assert (row.partition, bytes(row.key), row.topic) == (part, f"u{i % 9}".encode(), topic)
        assert int(row.timestamp.timestamp() * 1000) == BASE_MS + i
        assert row.timestampType == 0 and row.headers is None
    special = by_value[b"with-headers"]
    assert [(h.key, bytes(h.value)) for h in special.headers] == [("trace", b"abc"), ("n", b"1")]
    # offsets are contiguous from batch to batch, at most 60 per trigger
    batches = [p for p in progress if p["numInputRows"]]
    assert len(batches) >= 4 and all(p["numInputRows"] <= 60 for p in batches)
    for before, after in itertools.pairwise(batches):
        assert json.loads(after["sources"][0]["startOffset"]) == json.loads(
            before["sources"][0]["endOffset"])
    end = json.loads(batches[-1]["sources"][0]["endOffset"])
    assert end == {topic: {str(p): parts.count(p) + (p == 1) for p in range(4)}}


def test_starting_offsets_latest_and_per_partition(spark, app_dir, bootstrap, topic):
    create(bootstrap, topic, 2)
    parts = produce(bootstrap, topic, _records(40), partitions=2)
    latest = _start(spark, app_dir, bootstrap, "src_latest", subscribe=topic,
                    startingOffsets="latest")
    given = _start(spark, app_dir, bootstrap, "src_given", subscribe=topic,
                   startingOffsets=json.dumps({topic: {"0": 5}}))
    try:
        latest.processAllAvailable()
        given.processAllAvailable()
        assert _rows(spark, "src_latest") == []
        assert len(_rows(spark, "src_given")) == 40 - 5
        assert min(r.offset for r in _rows(spark, "src_given") if r.partition == 0) == 5
        produce(bootstrap, topic, [(f"u{i}", {"late": i}, BASE_MS) for i in range(10)],
                partitions=2)
        latest.processAllAvailable()
        assert sorted(json.loads(r.value)["late"] for r in _rows(spark, "src_latest")) == list(
            range(10))
    finally:
        latest.stop()
        given.stop()
    assert parts.count(0) > 5


def test_pattern_reads_matching_topics_including_new_ones(spark, app_dir, bootstrap, topic):
    for suffix in ("a", "b", "x"):
        create(bootstrap, f"{topic}.{suffix}", 2)
        produce(bootstrap, f"{topic}.{suffix}", _records(10), partitions=2)
    query = _start(spark, app_dir, bootstrap, "src_pattern",
                   subscribePattern=f"{topic}\\.[ab]")
    try:
        query.processAllAvailable()
        assert sorted({r.topic for r in _rows(spark, "src_pattern")}) == [
            f"{topic}.a", f"{topic}.b"]
        assert len(_rows(spark, "src_pattern")) == 20
    finally:
        query.stop()


def test_a_missing_topic_stops_the_query_naming_it(spark, app_dir, bootstrap):
    query = _start(spark, app_dir, bootstrap, "src_missing", subscribe="no-such-clicks")
    with pytest.raises(Exception, match="Kafka topic 'no-such-clicks' does not exist"):
        query.processAllAvailable()
    query.stop()


def test_a_partition_that_went_back_is_data_loss_unless_allowed(spark, app_dir, bootstrap,
                                                                 topic):
    create(bootstrap, topic, 2)
    produce(bootstrap, topic, _records(30), partitions=2)
    rows: list = []
    first = _start_collecting(spark, app_dir, bootstrap, "src_loss", rows, subscribe=topic)
    first.processAllAvailable()
    first.stop()
    assert len(rows) == 30
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result()
    create(bootstrap, topic, 2)  # re-created: offsets start again from 0
    produce(bootstrap, topic, [("u1", {"new": 1}, BASE_MS)], partitions=2)
    strict = _start_collecting(spark, app_dir, bootstrap, "src_loss", rows, subscribe=topic)
    with pytest.raises(Exception) as err:
        strict.processAllAvailable()
    strict.stop()
    assert f"Kafka topic {topic!r} partition" in str(err.value)
    assert "was the topic deleted and re-created?" in str(err.value)
    lenient = _start_collecting(spark, app_dir, bootstrap, "src_loss", rows, subscribe=topic,
                                failOnDataLoss="false")
    try:
        lenient.processAllAvailable()
    finally:
        lenient.stop()
    assert [json.loads(r.value) for r in rows[30:]] == [{"new": 1}]


def _partition_counts(rows):
    return {p: sum(1 for r in rows if r.partition == p) for p in (0, 1)}


def test_records_deleted_before_they_were_read_stop_or_are_skipped_and_counted(
        spark, app_dir, bootstrap, topic):
    from confluent_kafka import TopicPartition

    create(bootstrap, topic, 2)
    produce(bootstrap, topic, _records(40), partitions=2)
    rows: list = []
    first = _start_collecting(spark, app_dir, bootstrap, "src_deleted", rows, subscribe=topic)
    first.processAllAvailable()
    first.stop()
    read = _partition_counts(rows)
    assert read[0] > 0 and sum(read.values()) == 40
    produce(bootstrap, topic, _records(40), partitions=2)  # offsets read[0] .. on partition 0
    # DeleteRecords: partition 0 now starts 5 records past what the query read
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (done,) = admin.delete_records([TopicPartition(topic, 0, read[0] + 5)]).values()
    assert done.result().low_watermark == read[0] + 5
    strict = _start_collecting(spark, app_dir, bootstrap, "src_deleted", rows, subscribe=topic)
    with pytest.raises(Exception) as err:
        strict.processAllAvailable()
    strict.stop()
    assert (f"Kafka topic {topic!r} partition 0: offsets {read[0]} to {read[0] + 4} were "
            "deleted before they were read") in str(err.value)
    assert len(rows) == 40  # nothing of the new records was taken
    lenient = _start_collecting(spark, app_dir, bootstrap, "src_deleted", rows, subscribe=topic,
                                failOnDataLoss="false")
    try:
        lenient.processAllAvailable()
        progress = lenient.lastProgress
    finally:
        lenient.stop()
    assert skipped_offsets(progress) == 5
    assert len(rows) == 80 - 5
    offsets = sorted(r.offset for r in rows if r.partition == 0)
    assert offsets[read[0]] == read[0] + 5  # the first record after the deleted ones


def test_range_rows_are_made_on_the_driver_capped_with_the_latest_offsets_they_carry(
        spark, app_dir, bootstrap, topic):
    """``kspark_kafka_ranges`` (what kspark's queries read Kafka through): one range row per
    partition and micro-batch, the ranges contiguous and capped per trigger, each end offset
    carrying the partitions' end offsets for the query's lag and caught-up checks."""
    from kspark.spark.internals.kafka_ranges import LATEST
    from kspark.spark.internals.progress import _caught_up, source_lag

    create(bootstrap, topic, 4)
    parts = produce(bootstrap, topic, _records(200))
    reader = spark.readStream.format("kspark_kafka_ranges")
    for key, value in {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                       "kspark.topic": "clicks", "maxOffsetsPerTrigger": "60"}.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("memory").queryName("src_ranges")
             .option("checkpointLocation", os.path.join(app_dir, "src_ranges")).start())
    try:
        query.processAllAvailable()
        progress = query.recentProgress
    finally:
        query.stop()
    rows = _rows(spark, "src_ranges")
    assert {r.kind for r in rows} == {"file"} and {r.topic for r in rows} == {"clicks"}
    ranges = sorted(tuple(json.loads(bytes(r.key))["range"]) for r in rows)
    for p in range(4):  # each partition's ranges follow one another from 0 to its end
        mine = [(start, end) for t, q, start, end in ranges if q == p and t == topic]
        assert [s for s, _ in mine] == [0, *[e for _, e in mine[:-1]]][:len(mine)]
        assert (mine[-1][1] if mine else 0) == parts.count(p)
    batches = [p for p in progress if p["numInputRows"]]
    assert len(batches) >= 4
    latest = {topic: {str(p): parts.count(p) for p in range(4)}}
    for batch in batches:
        source = batch["sources"][0]
        end = json.loads(source["endOffset"])
        assert end[LATEST] == latest
        start = json.loads(source["startOffset"] or "null") or {}  # none: the first batch
        taken = sum(end[topic].values()) - sum(start.get(topic, {}).values())
        assert 0 < taken <= 60
        assert source_lag(batch) == 200 - sum(end[topic].values())
    assert not _caught_up(batches[0]["sources"][0])
    assert _caught_up(batches[-1]["sources"][0])
