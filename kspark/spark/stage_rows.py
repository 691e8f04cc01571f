"""The row work of one stage batch (see :mod:`kspark.spark.stage`): unpack and order a task's
input rows, run the task, and turn its output into rows, as columns with pandas and numpy."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kspark.hashing import kafka_partitions
from kspark.io.schema import KIND_CHANGELOG, KIND_METRICS, KIND_RECORD, TICK_TOPIC
from kspark.runtime.batch import TaskStateBackend, run_task_batch
from kspark.runtime.partition_group import UPSTREAM_STRIDE, processing_order
from kspark.runtime.serialized import Encoded, SourceBatch
from kspark.spark.packing import (
    FILE_PREFIX,
    PACKED_PREFIX,
    ipc_bytes,
    records_of,
    unpack_records,
)
from kspark.state.changelog import ChangelogCodec

OUTPUT_COLUMNS = ["kind", "topic", "key", "value", "timestamp", "partition", "offset", "task"]


def stage_batch(
    stage: Any,
    topology: Any,
    partition: int,
    rows: Iterator[pd.DataFrame],
    state: TaskStateBackend,
) -> Iterator[pd.DataFrame]:
    """Output rows of one task's micro-batch in ``stage`` (a
    :class:`~kspark.spark.stage.StageProcessor`): rows of other topics pass through."""
    frame = pd.concat(list(rows), ignore_index=True)
    sub = topology.sub_topologies()[stage.sub_topology_id]
    topics = frame["topic"]
    # a packed row carries records of the topic after the prefix, a file row stands for them
    unprefixed = topics.str.removeprefix(PACKED_PREFIX).str.removeprefix(FILE_PREFIX)
    own = (unprefixed.isin(sub.source_topics) & (frame["kind"] == KIND_RECORD)).to_numpy()
    ticks = bool((topics == TICK_TOPIC).any())
    if not own.all():
        passthrough = frame[~own]  # packed rows of other topics stay packed
        if len(passthrough):
            yield passthrough[OUTPUT_COLUMNS]
        frame = frame[own]
    if not len(frame) and not ticks:
        return
    columns = record_columns(frame, stage.file_records)
    if not len(columns["offset"]) and not ticks:
        return  # file rows of ranges without records of this task
    out = _run_task(stage, topology, sub, partition, columns, state)
    if len(out):  # pyspark 4.3 cannot convert an empty result frame to Arrow
        yield out


def _run_task(
    stage: Any,
    topology: Any,
    sub: Any,
    partition: int,
    frame: Columns,
    state: TaskStateBackend,
) -> pd.DataFrame:
    result = run_task_batch(
        topology,
        sub,
        partition,
        _ordered(frame, topology.internal_topics),
        state,
        stage.config,
        changelog_stores=stage.changelog_topics.keys(),
    )
    task_id = f"{sub.id}_{partition}"
    base = partition * UPSTREAM_STRIDE + result.first_output_seq
    topics, keys, values, stamps = result.output_columns()
    count = len(topics)
    rows: dict[str, list[Any]] = {
        "kind": [KIND_RECORD] * count,
        "topic": topics,
        "key": keys,
        "value": values,
        "timestamp": stamps,
        "partition": _partitions_of(stage.topic_partitions, topics, keys).tolist(),
        "offset": list(range(base, base + count)),
        "task": [task_id] * count,
    }
    if stage.changelog_topics:
        _changelog_rows(
            stage.changelog_topics, topology, result.changelog, rows, task_id, partition
        )
    counters = {k: v for k, v in result.metrics.counters.items() if v}
    if counters:
        metrics_row = (
            KIND_METRICS,
            None,
            None,
            json.dumps(counters).encode(),
            -1,
            partition,
            -1,
            task_id,
        )
        for column, value in zip(OUTPUT_COLUMNS, metrics_row):
            rows[column].append(value)
    # typed arrays: pandas does not infer a type per column
    columns = {name: np.array(rows[name], dtype=dtype) for name, dtype in _OUTPUT_DTYPES.items()}
    return pd.DataFrame(
        pack_output(columns, _read_topics(topology)), columns=OUTPUT_COLUMNS, copy=False
    )


def _read_topics(topology: Any) -> frozenset[str]:
    """The topics some sub-topology of ``topology`` reads (a later stage of the query may take
    their records from this stage's rows)."""
    return frozenset(t for sub in topology.sub_topologies() for t in sub.source_topics)


#: the columns of a packed output row's records (see :func:`pack_output`)
_OUTPUT_PACKED = pa.schema([("key", pa.binary()), ("value", pa.binary()),
                            ("timestamp", pa.int64()), ("partition", pa.int32()),
                            ("offset", pa.int64())])


def pack_output(columns: Columns, read_topics: Collection[str]) -> Columns:
    """A task's output rows with the records of each topic no stage reads (the app's sinks)
    packed into one row: Arrow IPC bytes in ``key`` (columns key, value, timestamp, partition,
    offset), topic ``PACKED_PREFIX + topic``. Spark then converts a row per topic and task
    instead of one per result; the driver expands them in place (:func:`unpack_output`), so
    each sink gets its records in the same order. Records of topics a stage reads stay rows,
    grouped by their own partition."""
    kinds, topics = columns["kind"], columns["topic"]
    if not len(kinds):
        return columns
    records = kinds == KIND_RECORD
    sinks = [t for t in pd.unique(topics[records]) if t is not None and t not in read_topics]
    if not sinks:
        return columns
    keep = np.ones(len(kinds), dtype=bool)
    packed: dict[str, list[Any]] = {name: [] for name in OUTPUT_COLUMNS}
    for topic in sinks:
        idx = np.flatnonzero(records & (topics == topic))
        keep[idx] = False
        batch = pa.RecordBatch.from_arrays(
            [pa.array(columns[f.name][idx], f.type) for f in _OUTPUT_PACKED],
            schema=_OUTPUT_PACKED,
        )
        first = int(idx[0])
        for name, value in (("kind", KIND_RECORD), ("topic", PACKED_PREFIX + str(topic)),
                            ("key", ipc_bytes(batch)), ("value", None),
                            ("timestamp", -1), ("partition", columns["partition"][first]),
                            ("offset", columns["offset"][first]),
                            ("task", columns["task"][first])):
            packed[name].append(value)
    return {
        name: np.concatenate([columns[name][keep], np.array(packed[name], dtype=dtype)])
        for name, dtype in _OUTPUT_DTYPES.items()
    }


def unpack_output(table: pa.Table) -> pa.Table:
    """The stages' output ``table`` (columns :data:`OUTPUT_COLUMNS`) with each row packed by
    :func:`pack_output` replaced, where it stands, by the records it carries."""
    import pyarrow.compute as pc

    flags = pc.fill_null(pc.starts_with(table.column("topic"), PACKED_PREFIX), False)
    at = np.flatnonzero(flags.to_numpy(zero_copy_only=False))
    if not len(at):
        return table
    pieces, prev = [], 0
    topics, blobs, tasks = (table.column(c) for c in ("topic", "key", "task"))
    for row in at.tolist():
        if row > prev:
            pieces.append(table.slice(prev, row - prev))
        inner = pa.ipc.open_stream(blobs[row].as_py()).read_all()
        n = inner.num_rows
        pieces.append(pa.table({
            "kind": pa.array([KIND_RECORD] * n, pa.string()),
            "topic": pa.array([topics[row].as_py()[len(PACKED_PREFIX):]] * n, pa.string()),
            **{name: inner.column(name) for name in _OUTPUT_PACKED.names},
            "task": pa.array([tasks[row].as_py()] * n, pa.string()),
        }).cast(table.schema))
        prev = row + 1
    if prev < table.num_rows:
        pieces.append(table.slice(prev))
    return pa.concat_tables(pieces)


_OUTPUT_DTYPES = {
    "kind": object, "topic": object, "key": object, "value": object,
    "timestamp": np.int64, "partition": np.int32, "offset": np.int64, "task": object,
}


def _partitions_of(
    counts: dict[str, int], topics: list[str], keys: list[bytes | None]
) -> np.ndarray:
    """The partition of each output record: Kafka's default partitioner by key (0 for a null
    key or a topic of one partition), hashed with numpy per topic."""
    out = np.zeros(len(keys), dtype=np.int32)
    if not keys:
        return out
    names = np.array(topics, dtype=object)
    for topic in dict.fromkeys(topics):
        n = counts.get(topic, 1)
        if n <= 1:
            continue
        keyed = [(i, k) for i in np.flatnonzero(names == topic).tolist()
                 if (k := keys[i]) is not None]
        if keyed:
            idx = np.array([i for i, _ in keyed], dtype=np.int64)
            out[idx] = kafka_partitions([k for _, k in keyed], n)
    return out


def _changelog_rows(
    changelog_topics: dict[str, str],
    topology: Any,
    changelog: dict[str, list],
    rows: dict[str, list],
    task_id: str,
    partition: int,
) -> None:
    """Append the batch's committed changes of each written-out store as changelog rows
    (partition = the task's partition, as Kafka Streams' changelogs are co-partitioned)."""
    for store, entries in changelog.items():
        topic = changelog_topics.get(store)
        if topic is None:
            continue
        codec = ChangelogCodec.for_builder(topology.store_builders[store])
        for key, value, ts in entries:
            for column, item in zip(
                OUTPUT_COLUMNS,
                (
                    KIND_CHANGELOG,
                    topic,
                    codec.encode_key(key),
                    codec.encode_value(value),
                    ts,
                    partition,
                    -1,
                    task_id,
                ),
            ):
                rows[column].append(item)


#: the columns of a task's input records, as :func:`record_columns` gives them
RECORD_FIELDS = ("topic", "key", "value", "timestamp", "partition", "offset")
_RECORD_DTYPES = (object, object, object, np.int64, np.int64, np.int64)
Columns = dict[str, np.ndarray]


def record_columns(
    frame: pd.DataFrame, file_records: Callable[[bytes, int], Any] | None = None
) -> Columns:
    """The records of ``frame``'s rows as numpy columns (:data:`RECORD_FIELDS`): packed rows
    (:func:`kspark.spark.packing.pack_records`) give the records they carry, and file rows
    (:func:`kspark.spark.file_source.file_range_rows`) the records that ``file_records(key,
    partition)`` reads for them, straight from Arrow without a pandas frame per record; other
    rows are records themselves."""
    topics = frame["topic"]
    packed = topics.str.startswith(PACKED_PREFIX, na=False).to_numpy(dtype=bool)
    in_files = topics.str.startswith(FILE_PREFIX, na=False).to_numpy(dtype=bool)
    parts: list[Columns] = []
    tables = []
    if packed.any():
        rows = frame[packed]
        tables.append(
            unpack_records(rows["topic"].tolist(), rows["partition"].tolist(), rows["key"].tolist())
        )
    if in_files.any():
        if file_records is None:
            raise ValueError("file rows need a file reader")
        rows = frame[in_files]
        read = [
            (topic, part, file_records(blob, part))
            for topic, part, blob in zip(rows["topic"], rows["partition"], rows["key"])
        ]
        read = [(t, p, pa.Table.from_batches([r])) for t, p, r in read if r is not None]
        if read:
            tables.append(records_of(*(list(c) for c in zip(*read))))
    packed |= in_files
    if tables:
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        columns: Columns = {}
        for name, dtype in zip(RECORD_FIELDS, _RECORD_DTYPES):
            column = table.column(name)
            if pa.types.is_dictionary(column.type):
                codes, uniques = _codes(column)
                columns[f"{name}_codes"], columns[f"{name}_uniques"] = codes, uniques
                known = np.empty(len(uniques) + 1, dtype=object)
                known[:-1] = uniques  # and None at -1
                columns[name] = known[codes]
            else:
                columns[name] = column.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
        parts.append(columns)
    if not packed.all():
        plain = frame[~packed]
        parts.append({
            name: plain[name].to_numpy(dtype=dtype)
            for name, dtype in zip(RECORD_FIELDS, _RECORD_DTYPES)
        })
    if len(parts) == 1:
        return parts[0]
    return {  # the codes of the packed part are left out
        name: np.concatenate([p[name] for p in parts]) if parts else np.empty(0, dtype)
        for name, dtype in zip(RECORD_FIELDS, _RECORD_DTYPES)
    }


def _codes(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """A dictionary-encoded Arrow column as ``(codes, distinct values)``, -1 for null."""
    import pyarrow.compute as pc

    column = column.unify_dictionaries()
    if not column.num_chunks:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
    indices = pa.chunked_array([chunk.indices for chunk in column.chunks])
    codes = pc.fill_null(indices, -1).to_numpy().astype(np.int64, copy=False)
    uniques = column.chunk(0).dictionary.to_numpy(zero_copy_only=False).astype(object, copy=False)
    return codes, uniques


def _ordered(frame: Columns | pd.DataFrame, repartition_topics: Collection[str] = ()
             ) -> SourceBatch:
    """The task's records in processing order (:mod:`kspark.runtime.partition_group`), as
    columns, without a Python object per record."""
    topics = np.asarray(frame["topic"], dtype=object)
    order, names = processing_order(
        topics, np.asarray(frame["offset"], dtype=np.int64),
        np.asarray(frame["timestamp"], dtype=np.int64), repartition_topics)
    if len(names) <= 1:
        return _batch(frame, order, names[0] if names else "", None)
    ordered = topics if order is None else topics[order]
    return _batch(frame, order, None, ordered.tolist())


def _batch(
    frame: Columns | pd.DataFrame,
    order: np.ndarray | None,
    topic: str | None,
    topics: list[str] | None,
) -> SourceBatch:
    def column(name: str, dtype: Any = None) -> np.ndarray:
        values = np.asarray(frame[name], dtype=dtype)
        return values if order is None else values[order]

    def encoded(name: str) -> Encoded | None:
        if f"{name}_codes" not in frame:
            return None
        return column(f"{name}_codes", np.int64), np.asarray(frame[f"{name}_uniques"])

    return SourceBatch(
        column("timestamp", np.int64),
        column("partition", np.int64),
        column("offset", np.int64),
        column("key", object),
        column("value", object),
        topic,
        topics,
        encoded("key"),
        encoded("value"),
    )
