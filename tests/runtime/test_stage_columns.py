"""The Spark stage's columnar input path without Spark: records packed many to a row by the file
source come back unchanged, the vectorised Parquet reader gives exactly the row-by-row reader's
records, ``_ordered`` keeps the processing order of the record-by-record version, and the task
grouping values spread tasks over shuffle partitions."""

from __future__ import annotations

import heapq
import os
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kspark.io.files import OFFSET_STRIDE, file_rows
from kspark.runtime.task import SourceRecord
from kspark.spark.internals import wire
from kspark.spark.internals.file_batches import parquet_batch
from kspark.spark.internals.row_schema import ROW_COLUMNS
from kspark.spark.internals.stage_rows import RECORD_FIELDS, _ordered, record_columns
from kspark.spark.internals.task_placement import (
    partition_tasks,
    spark_hash_int,
    task_group_values,
)
from kspark.spark.internals.wire import (
    INPUT_ARROW,
    KIND_PACKED,
    KIND_RECORD,
    ROW_ARROW,
    pack_records,
    record_rows,
)


def input_batch(rows: list[tuple]) -> pa.RecordBatch:
    keys, values, topics, parts, offsets, stamps = zip(*rows)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(topics, pa.string()),
            pa.array(parts, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, pa.int64()),
        ],
        schema=INPUT_ARROW,
    )


def as_frame(batch: pa.RecordBatch) -> pd.DataFrame:
    """Rows as a stage gets them: records (:data:`INPUT_ARROW`) as one row each."""
    rows = batch if batch.schema == ROW_ARROW else record_rows(batch)
    return rows.to_pandas()[ROW_COLUMNS]


def records_frame(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(record_columns(frame), columns=list(RECORD_FIELDS))


def test_packed_rows_unpack_to_the_same_records(monkeypatch):
    monkeypatch.setattr(wire, "PACK_ROWS", 7)
    rng = random.Random(3)
    rows = [
        (None if i % 11 == 0 else f"k{rng.randrange(9)}".encode(),
         None if i % 13 == 0 else str(i).encode(), "clicks", rng.randrange(3), 1000 + i,
         rng.randrange(10**6))
        for i in range(100)
    ]
    plain = as_frame(input_batch(rows))
    packed = pack_records(input_batch(rows))
    assert packed.num_rows < 30
    unpacked = records_frame(as_frame(packed))
    key = ["partition", "offset"]
    expected = records_frame(plain)
    assert (
        unpacked.sort_values(key).reset_index(drop=True).equals(
            expected.sort_values(key).reset_index(drop=True)
        )
    )
    assert len(expected) == len(rows) and expected["key"].tolist() == [r[0] for r in rows]
    # mixed with rows of another source, which stay as they are
    other = as_frame(input_batch([(b"x", b"1", "other", 1, 5, 7)]))
    mixed = records_frame(pd.concat([other, as_frame(packed)], ignore_index=True))
    assert len(mixed) == len(rows) + 1
    assert mixed[mixed["topic"] == "other"].to_dict("records") == [
        {"topic": "other", "key": b"x", "value": b"1", "timestamp": 7, "partition": 1,
         "offset": 5}
    ]


def test_packing_gives_a_batch_it_cannot_pack_as_record_rows():
    rows = [(b"k", b"v", "a", 0, 1, 2), (b"k", b"w", "b", 1, 2, 3)]  # two topics
    encoded = pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows]).dictionary_encode(),
         pa.array([r[1] for r in rows]).dictionary_encode(),
         *input_batch(rows).columns[2:]],
        names=INPUT_ARROW.names,
    )
    out = pack_records(encoded)
    assert out.schema == ROW_ARROW and set(out.column("kind").to_pylist()) == {KIND_RECORD}
    assert out.to_pydict() == record_rows(input_batch(rows)).to_pydict()
    assert [out.column(c).to_pylist() for c in ("key", "value", "topic", "offset")] == [
        [r[i] for r in rows] for i in (0, 1, 2, 4)]
    assert pack_records(encoded.slice(0, 0)).schema == ROW_ARROW


def test_packed_keys_and_values_arrive_as_codes_that_decode_alike(monkeypatch):
    from kspark import serdes
    from kspark.runtime.decoding import decode_column

    monkeypatch.setattr(wire, "PACK_ROWS", 9)
    rng = random.Random(11)
    rows = [
        (None if i % 7 == 0 else f"k{rng.randrange(12)}".encode(),
         None if i % 5 == 0 else str(rng.randrange(4)).encode(), "clicks", rng.randrange(2),
         offset, rng.randrange(50))
        for i, offset in enumerate(rng.sample(range(1000), 80))  # not in offset order
    ]
    batch = _ordered(record_columns(as_frame(pack_records(input_batch(rows)))))
    assert batch.encoded_keys is not None and batch.encoded_values is not None
    for raw, encoded, dedupe in ((batch.keys, batch.encoded_keys, True),
                                 (batch.values, batch.encoded_values, False)):
        codes, uniques = encoded
        assert len(set(uniques.tolist())) == len(uniques)
        assert [None if c < 0 else uniques[c] for c in codes.tolist()] == list(raw)
        fast = decode_column(raw, serdes.String(), dedupe=dedupe, encoded=encoded)
        slow = decode_column(raw, serdes.String(), dedupe=dedupe)
        assert fast.codes.tolist() == slow.codes.tolist()
        assert list(fast.uniques) == list(slow.uniques)
    # plain rows carry no codes
    assert _ordered(record_columns(as_frame(input_batch(rows)))).encoded_keys is None


def test_output_partitions_are_kafkas_default_partitioner_per_topic():
    from kspark.hashing import kafka_partition
    from kspark.spark.internals.stage_rows import _partitions_of

    rng = random.Random(7)
    counts = {"four": 4, "seven": 7, "one": 1}
    topics = [rng.choice(["four", "seven", "one", "unknown"]) for _ in range(300)]
    keys = [None if rng.random() < 0.1 else f"k{rng.randrange(50)}".encode() for _ in topics]
    expected = [
        0 if key is None or counts.get(topic, 1) <= 1 else kafka_partition(key, counts[topic])
        for topic, key in zip(topics, keys)
    ]
    assert _partitions_of(counts, topics, keys).tolist() == expected
    assert _partitions_of(counts, [], []).tolist() == []
    # windowed keys go to the partition of their inner key (the bytes before the window's)
    windows = [None if k is None else k + rng.randbytes(16) for k in keys]
    assert _partitions_of(counts, topics, windows, {"four": 16, "seven": 16}).tolist() == [
        e if t in ("four", "seven") else got
        for e, t, got in zip(expected, topics, _partitions_of(counts, topics, windows).tolist())
    ]


def test_a_windowed_sink_key_serde_makes_its_topic_partition_by_the_inner_key():
    from kspark import SessionWindows, StreamsBuilder, TimeWindows, serdes

    builder = StreamsBuilder()
    grouped = builder.stream("in", serdes.String(), serdes.String()).group_by_key()
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 0)).count() \
        .to_stream().to("sessions", serdes.SessionWindowed(serdes.String()), serdes.Long())
    grouped.windowed_by(TimeWindows.of_size_and_grace(10, 0)).count().to_stream() \
        .to("windows", serdes.TimeWindowed(serdes.String(), 10), serdes.Long())
    grouped.count().to_stream().to("plain", serdes.String(), serdes.Long())
    assert builder.build().partition_suffixes() == {"sessions": 16, "windows": 8}


def test_ordered_matches_the_record_by_record_order():
    rng = random.Random(5)
    rows = []
    for topic in ("a", "b", "c"):
        for off in rng.sample(range(1000), 40):
            rows.append((b"k", b"v", topic, 0, off, rng.randrange(500)))
    rng.shuffle(rows)
    frame = as_frame(input_batch(rows))

    # the original algorithm: per topic by offset; across topics the smallest next timestamp
    per_topic = []
    for _, part in frame.sort_values(["topic", "offset"], kind="stable").groupby("topic"):
        per_topic.append([SourceRecord(t, int(p), int(o), int(ts), k, v) for t, p, o, ts, k, v in
                          zip(part.topic, part.partition, part.offset, part.timestamp, part.key,
                              part.value)])
    heads = [(lst[0].timestamp, i, 0) for i, lst in enumerate(per_topic)]
    heapq.heapify(heads)
    expected = []
    while heads:
        _, i, j = heapq.heappop(heads)
        expected.append(per_topic[i][j])
        if j + 1 < len(per_topic[i]):
            heapq.heappush(heads, (per_topic[i][j + 1].timestamp, i, j + 1))

    assert list(_ordered(frame).records()) == expected
    single = frame[frame.topic == "b"]
    assert list(_ordered(single).records()) == [r for r in expected if r.topic == "b"]
    assert _ordered(single).topic == "b"


@pytest.mark.parametrize("parts", [1, 4])
def test_parquet_reader_equals_row_by_row_reader(tmp_path, parts):
    path = os.path.join(tmp_path, "part.parquet")
    table = pa.table({
        "key": ["a", None, "b", "a", "ü", "c"] * 50,
        "ts": list(range(300)),
        "value": [1, 2, None, 1, 7, 3] * 50,
        "text": ["x", "y\"", None, "é", "", "z"] * 50,
    })
    pq.write_table(table, path, row_group_size=64)
    for value_field in ("value", "text", "missing", None):
        for lo, hi in ((0, None), (70, 200)):
            batch = parquet_batch(path, lo, hi, "key", value_field, "ts", parts, "t",
                                   3 * OFFSET_STRIDE)
            keys, values, stamps, partitions = (
                c[lo:hi] for c in file_rows(path, "parquet", "key", value_field, "ts", parts)
            )
            got = batch.to_pydict()
            # dictionary-encoded for packing: the same records
            encoded = parquet_batch(path, lo, hi, "key", value_field, "ts", parts, "t",
                                     3 * OFFSET_STRIDE, dictionary=True)
            assert pa.types.is_dictionary(encoded.schema.field("key").type)
            assert encoded.to_pydict() == got
            assert records_frame(as_frame(pack_records(encoded))).equals(
                records_frame(as_frame(pack_records(batch))))
            assert got["key"] == keys
            assert got["value"] == values
            assert got["timestamp"] == stamps
            assert got["partition"] == partitions
            start = 3 * OFFSET_STRIDE + lo
            assert got["offset"] == list(range(start, start + len(keys)))
    # what the vectorised reader leaves to the row-by-row one
    assert parquet_batch(path, 0, None, "key", "value", "missing", parts, "t", 0) is None
    nested = os.path.join(tmp_path, "nested.parquet")
    pq.write_table(table.append_column("tags", pa.array([["t"]] * 300)), nested)
    assert parquet_batch(nested, 0, None, "key", None, "ts", parts, "t", 0) is None
    assert parquet_batch(nested, 0, None, "key", "value", "ts", parts, "t", 0) is not None


def test_task_group_values_spread_tasks_over_shuffle_partitions():
    # Spark's hash() of the ints 0..3 (checked with spark.sql("select hash(cast(id as int))"))
    assert [spark_hash_int(i) for i in range(4)] == [
        933211791, -559580957, 1765031574, -1823081949
    ]
    for tasks in (1, 2, 3, 4, 6, 8, 16, 100):
        values = task_group_values(tasks)
        assert [v % tasks for v in values] == list(range(tasks))
        assert [spark_hash_int(v) % tasks for v in values] == list(range(tasks))
    assert np.unique([spark_hash_int(i) % 4 for i in range(4)]).size < 4  # why it is needed


def test_repartition_rows_merge_upstream_tasks_by_timestamp():
    # two upstream tasks wrote to partition 0 of a repartition topic in the same micro-batch;
    # each task's rows keep their order, and the two interleave by timestamp
    stride = 1 << 40
    up0 = [(0 * stride + i, ts) for i, ts in enumerate([10, 20, 30, 15])]
    up1 = [(1 * stride + i, ts) for i, ts in enumerate([5, 25, 26])]
    rows = [(b"k", b"v", "app-repartition", 0, off, ts) for off, ts in up1 + up0]
    frame = as_frame(input_batch(rows))
    batch = _ordered(frame, {"app-repartition"})
    got = [(r.offset, r.timestamp) for r in batch.records()]
    assert got == [up1[0], up0[0], up0[1], up1[1], up1[2], up0[2], up0[3]]
    for upstream in (up0, up1):  # each upstream task's own order is kept
        assert [x for x in got if x in upstream] == upstream
    # a topic not named as repartition topic stays in offset order
    plain = [(r.offset, r.timestamp) for r in _ordered(frame).records()]
    assert plain == up0 + up1


def test_pack_stream_packs_arrow_batches_and_unpacks_to_the_same_records(monkeypatch):
    monkeypatch.setattr(wire, "PACK_ROWS", 25)
    rng = random.Random(9)
    rows = [(f"k{rng.randrange(9)}".encode(), str(i).encode(), "clicks", rng.randrange(4), i,
             rng.randrange(10**6)) for i in range(120)]
    batches = [input_batch(rows[i : i + 10]) for i in range(0, len(rows), 10)]
    packed = list(wire.pack_stream(iter(batches)))
    assert sum(b.num_rows for b in packed) < 40
    got = records_frame(pd.concat([as_frame(b) for b in packed], ignore_index=True))
    key = ["partition", "offset"]
    assert got.sort_values(key).reset_index(drop=True).equals(
        records_frame(as_frame(input_batch(rows))).sort_values(key).reset_index(drop=True))


def _output_columns(rng: random.Random, task: str, n: int) -> dict[str, np.ndarray]:
    from kspark.records import encode_headers
    from kspark.spark.internals.wire import KIND_CHANGELOG, KIND_METRICS, ROW_DTYPES

    rows = []
    for i in range(n):
        kind = rng.choice([KIND_RECORD] * 6 + [KIND_CHANGELOG])
        topic = rng.choice(["sink-a", "sink-b", "repartition-r"]) if kind == KIND_RECORD \
            else "app-store-changelog"
        # headers on some records (each topic's packed records then carry them)
        headers = (encode_headers((("h", str(i).encode()), ("h", None)))
                   if kind == KIND_RECORD and i % 5 == 0 else None)
        rows.append((kind, topic, None if i % 9 == 0 else f"k{i}".encode(),
                     None if i % 7 == 0 else str(i).encode(), rng.randrange(10**6),
                     rng.randrange(4), 1000 + i, task, headers))
    rows.append((KIND_METRICS, None, None, b"{}", -1, 0, -1, task, None))
    return {name: np.array([r[k] for r in rows], dtype=dtype)
            for k, (name, dtype) in enumerate(ROW_DTYPES.items())}


def test_packed_output_expands_to_each_topics_records_in_order():
    from kspark.spark.internals.wire import (
        KIND_CHANGELOG,
        KIND_PACKED_CHANGELOG,
        pack_output,
        unpack_output,
    )

    rng = random.Random(5)
    tasks = [_output_columns(rng, f"0_{t}", 60) for t in range(3)]

    def table(parts: list[dict[str, np.ndarray]]) -> pa.Table:  # as Spark hands it over
        frame = pd.concat([pd.DataFrame(p, columns=ROW_COLUMNS) for p in parts],
                          ignore_index=True)
        return pa.Table.from_pandas(frame, preserve_index=False)

    plain = table(tasks).to_pylist()
    packed_parts = [pack_output(p, {"repartition-r"}) for p in tasks]
    # one row per sink topic and task; the repartition topic and other kinds stay rows
    packed = table(packed_parts)
    packed_topics = [r["topic"] for r in packed.to_pylist() if r["kind"] == KIND_PACKED]
    assert sorted(packed_topics) == sorted(["sink-a", "sink-b"] * 3)
    changelogs = [r["topic"] for r in packed.to_pylist() if r["kind"] == KIND_PACKED_CHANGELOG]
    assert changelogs == ["app-store-changelog"] * 3
    assert not any(r["kind"] == KIND_CHANGELOG for r in packed.to_pylist())
    assert packed.num_rows < len(plain) / 2
    expanded = unpack_output(packed).to_pylist()
    assert sorted(map(repr, expanded)) == sorted(map(repr, plain))
    assert any(r["headers"] for r in expanded if r["topic"] == "sink-a")
    for topic in ("sink-a", "sink-b", "repartition-r", "app-store-changelog"):
        assert [r for r in expanded if r["topic"] == topic] == [
            r for r in plain if r["topic"] == topic]
    assert unpack_output(table(tasks)).to_pylist() == plain  # nothing packed: as it is


@pytest.mark.parametrize(("tasks", "partitions"), [(4, 2), (4, 4), (7, 3), (16, 5), (3, 1)])
def test_each_shuffle_partition_knows_the_tasks_it_runs(tasks, partitions):
    """A stage opens the sink writers of the tasks its Spark task will run before they run:
    exactly the tasks whose grouping value Spark's hash partitioning places there."""
    placed: dict[int, list[int]] = {}
    for task, value in enumerate(task_group_values(tasks, partitions)):
        placed.setdefault(spark_hash_int(value) % partitions, []).append(task)
    for q in range(partitions):
        assert partition_tasks(tasks, partitions, q) == placed.get(q, [])

