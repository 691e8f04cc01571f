"""The row work of one stage batch (see :mod:`.stage`): unpack and order a task's input rows,
run the task, and turn its output into rows, as columns with pandas and numpy."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import nullcontext
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kspark.errors import StreamsError
from kspark.hashing import kafka_partitions
from kspark.records import Headers, decode_headers, encode_headers
from kspark.runtime.batch import TaskStateBackend, run_task_batch
from kspark.runtime.changelog_entries import ChangelogEntries
from kspark.runtime.metrics import Metrics
from kspark.runtime.partition_group import UPSTREAM_STRIDE, processing_order
from kspark.runtime.serialized import (
    Encoded,
    Output,
    SourceBatch,
    output_columns,
    output_headers,
    output_partitions,
)
from kspark.spark.internals.row_schema import ROW_COLUMNS
from kspark.spark.internals.task_sinks import TaskSinks, TopicRecords, chunked
from kspark.spark.internals.wire import (
    KIND_CHANGELOG,
    KIND_FILE,
    KIND_METRICS,
    KIND_PACKED,
    KIND_RECORD,
    KIND_TICK,
    RECORD_KINDS,
    ROW_DTYPES,
    Columns,
    concat_records,
    pack_output,
    records_of,
    unpack_records,
)
from kspark.state.internals.changelog import ChangelogCodec


def stage_batch(
    stage: Any,
    topology: Any,
    partition: int,
    rows: Iterator[pd.DataFrame],
    state: TaskStateBackend,
) -> Iterator[pd.DataFrame]:
    """Output rows of one task's micro-batch in ``stage`` (a
    :class:`~kspark.spark.internals.stage.StageProcessor`): rows of other topics pass through."""
    frame = pd.concat(list(rows), ignore_index=True)
    sub = topology.sub_topologies()[stage.sub_topology_id]
    kinds = frame["kind"]
    own = (frame["topic"].isin(sub.source_topics) & kinds.isin(RECORD_KINDS)).to_numpy()
    ticks = bool((kinds == KIND_TICK).any())
    # packed rows of other topics stay packed; a global store's rows also go on to the later
    # stages that keep the store
    passing = ~own | frame["topic"].isin(stage.global_topics_after).to_numpy()
    if passing.any():
        yield frame[passing][ROW_COLUMNS]
    if not own.all():
        frame = frame[own]
    if not len(frame) and not ticks:
        return
    columns = record_columns(frame, stage.file_records)
    if not len(columns["offset"]) and not ticks:
        return  # file rows of ranges without records of this task
    # the Arrow data the records were read as is freed by now: its memory goes back to the
    # system before the task runs, rather than when the Spark task ends
    pa.default_memory_pool().release_unused()
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
    """Run the task's batch; its output as rows, but for what the stage's sinks write right
    away."""
    sinks: TaskSinks | None = stage.task_sinks
    task_id = f"{sub.id}_{partition}"
    with nullcontext() if sinks is None else sinks.running(task_id):
        sliced = (None if sinks is None or stage.config.task_batch_max_records is None
                  else _SliceWriter(stage, topology, partition, sinks, task_id))
        result = run_task_batch(
            topology,
            sub,
            partition,
            _ordered(frame, topology.internal_topics, topology.global_topics()),
            state,
            stage.config,
            changelog_stores=stage.changelog_topics.keys(),
            sliced=sliced,
        )
        if sliced is not None:
            result.metrics.merge_all(sliced.metrics)
        base = partition * UPSTREAM_STRIDE + result.first_output_seq
        topics, keys, values, stamps, partition_list, headers = _output_columns(
            stage, topology, task_id, result.parts)
        count = len(topics)
        offsets = list(range(base, base + count))
        written: dict[str, Any] = {}
        if sinks is not None and count:
            written, keep = sinks.split(topics, keys, values, stamps, partition_list, headers)
            if written:  # the other records stay rows
                idx = np.flatnonzero(keep).tolist()
                topics = [topics[i] for i in idx]
                keys = [keys[i] for i in idx]
                values = [values[i] for i in idx]
                stamps = [stamps[i] for i in idx]
                partition_list = [partition_list[i] for i in idx]
                offsets = [offsets[i] for i in idx]
                headers = None if headers is None else [headers[i] for i in idx]
                count = len(idx)
        rows: dict[str, list[Any]] = {
            "kind": [KIND_RECORD] * count,
            "topic": topics,
            "key": keys,
            "value": values,
            "timestamp": stamps,
            "partition": partition_list,
            "offset": offsets,
            "task": [task_id] * count,
            "headers": ([None] * count if headers is None
                        else [encode_headers(h) if h else None for h in headers]),
        }
        changelogs: dict[str, TopicRecords] = {}
        if stage.changelog_topics:
            changelogs = _changelog_rows(
                stage.changelog_topics, topology, result.changelog, rows, task_id, partition,
                sinks.topics if sinks is not None else frozenset())
        if sinks is not None:
            sinks.write(task_id, written, changelogs, result.metrics)
        if result.metrics.has_figures():
            metrics_row = (
                KIND_METRICS,
                None,
                None,
                result.metrics.to_json(),
                -1,
                partition,
                -1,
                task_id,
                None,
            )
            for column, value in zip(ROW_COLUMNS, metrics_row):
                rows[column].append(value)
        # typed arrays: pandas does not infer a type per column
        columns = {name: np.array(rows[name], dtype=dtype) for name, dtype in ROW_DTYPES.items()}
        return pd.DataFrame(
            pack_output(columns, _read_topics(topology)), columns=ROW_COLUMNS, copy=False
        )


def _output_columns(stage: Any, topology: Any, task_id: str, parts: Output
                    ) -> tuple[list[str], list[Any], list[Any], list[int], list[int], Any]:
    """Topic, key, value, timestamp, partition and headers of each record of ``parts``."""
    topics, keys, values, stamps = output_columns(parts)
    unknown = set(topics) - stage.topic_partitions.keys()
    if unknown:  # a topic extractor's choice
        raise StreamsError(
            f"task {task_id} wrote to topic {sorted(unknown)[0]!r}, which is not one of the "
            f"app's topics {sorted(stage.topic_partitions)}: declare it in StreamsApp's "
            f"topics={{...}}")
    partitions = _partitions_of(stage.topic_partitions, topics, keys,
                                topology.partition_suffixes())
    chosen = output_partitions(parts)
    if chosen is not None:  # a sink's partitioner chose these
        for i, p in enumerate(chosen):
            if p is not None:
                partitions[i] = p % stage.topic_partitions.get(topics[i], 1)
    return topics, keys, values, stamps, partitions.tolist(), output_headers(parts)


class _SliceWriter:
    """A task's :class:`~kspark.runtime.batch.SliceOutput` in a stage whose sinks write: the
    records of the topics they write (and their changelogs) written into the task's
    transaction as each slice ends, the rest left for the batch's rows."""

    def __init__(self, stage: Any, topology: Any, partition: int, sinks: TaskSinks,
                 task_id: str) -> None:
        self.stage, self.topology, self.partition = stage, topology, partition
        self.sinks, self.task_id = sinks, task_id
        #: what the writes counted (the batch's metrics take them at its end)
        self.metrics = Metrics()

    def write(self, output: Output, changelog: dict[str, ChangelogEntries]
              ) -> tuple[Output, dict[str, ChangelogEntries]]:
        written = self.sinks.topics
        records: dict[str, TopicRecords] = {}
        mine = [part for part in output if part.topic in written]
        if mine:
            records, _ = self.sinks.split(*_output_columns(self.stage, self.topology,
                                                           self.task_id, mine))
        logs = _changelog_rows(self.stage.changelog_topics, self.topology,
                               {store: entries for store, entries in changelog.items()
                                if self.stage.changelog_topics.get(store) in written},
                               {}, self.task_id, self.partition, written)
        if records or logs:
            self.sinks.write(self.task_id, records, logs, self.metrics, final=False)
        return ([part for part in output if part.topic not in written],
                {store: entries for store, entries in changelog.items()
                 if self.stage.changelog_topics.get(store) not in written})

    def restart(self) -> None:
        self.metrics = Metrics()
        self.sinks.abort(self.task_id)


def _read_topics(topology: Any) -> frozenset[str]:
    """The topics some sub-topology of ``topology`` reads (a later stage of the query may take
    their records from this stage's rows)."""
    return frozenset(t for sub in topology.sub_topologies() for t in sub.source_topics)


def _partitions_of(
    counts: dict[str, int], topics: list[str], keys: list[bytes | None],
    suffixes: dict[str, int] | None = None,
) -> np.ndarray:
    """The partition of each output record: Kafka's default partitioner by key (0 for a null
    key or a topic of one partition), hashed with numpy per topic; for a topic in ``suffixes``
    (windowed keys) by the key without its last ``suffixes[topic]`` bytes (the inner key)."""
    suffixes = suffixes or {}
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
            cut = suffixes.get(topic, 0)
            base = [k[:-cut] for _, k in keyed] if cut else [k for _, k in keyed]
            out[idx] = kafka_partitions(base, n)
    return out


def _changelog_rows(
    changelog_topics: dict[str, str],
    topology: Any,
    changelog: dict[str, ChangelogEntries],
    rows: dict[str, list],
    task_id: str,
    partition: int,
    written_here: frozenset[str] = frozenset(),
) -> dict[str, TopicRecords]:
    """Append the batch's committed changes of each written-out store as changelog rows
    (partition = the task's partition, as Kafka Streams' changelogs are co-partitioned); those
    of the topics in ``written_here`` are returned instead, encoded as a task writer takes
    them."""
    out = {}
    for store, entries in changelog.items():
        topic = changelog_topics.get(store)
        if topic is None:
            continue
        codec = ChangelogCodec.for_builder(topology.store_builders[store])
        if topic in written_here:
            out[topic] = TopicRecords(entries.timestamps,
                                      chunked(len(entries), _encoder(codec, entries, partition)))
            continue
        keys = [codec.encode_key(key) for key in entries.keys]
        values = [codec.encode_value(value) for value in entries.values]
        n = len(entries)
        columns: tuple[list[Any], ...] = (
            [KIND_CHANGELOG] * n,
            [topic] * n,
            keys,
            values,
            entries.timestamps,
            [partition] * n,
            [-1] * n,
            [task_id] * n,
            [None] * n,
        )
        for column, items in zip(ROW_COLUMNS, columns):
            rows[column].extend(items)
    return out


def _encoder(codec: ChangelogCodec, entries: ChangelogEntries, partition: int
             ) -> Callable[[int, int], list[tuple[Any, Any, int, int, Any]]]:
    """The changelog records of ``entries`` ``start`` to ``stop``, encoded, as a task writer
    takes them."""
    def rows(start: int, stop: int) -> list[tuple[Any, Any, int, int, Any]]:
        return [(codec.encode_key(k), codec.encode_value(v), ts, partition, None)
                for k, v, ts in zip(entries.keys[start:stop], entries.values[start:stop],
                                    entries.timestamps[start:stop])]

    return rows


#: the columns of a task's input records, as :func:`record_columns` gives them (and
#: ``headers``, :func:`encode_headers` bytes or ``None``, when some record has any)
RECORD_FIELDS = ("topic", "key", "value", "timestamp", "partition", "offset")
_HEADERS = "headers"
_RECORD_DTYPES = (object, object, object, np.int64, np.int64, np.int64)


def record_columns(
    frame: pd.DataFrame, file_records: Callable[[bytes, int], Any] | None = None
) -> Columns:
    """The records of ``frame``'s rows as numpy columns (:data:`RECORD_FIELDS`): ``packed``
    rows give the records they carry, and ``file`` rows the records that ``file_records(key,
    partition)`` reads for them, straight from Arrow without a pandas frame per record;
    ``record`` rows are records themselves."""
    kinds = frame["kind"]
    packed = (kinds == KIND_PACKED).to_numpy(dtype=bool)
    in_files = (kinds == KIND_FILE).to_numpy(dtype=bool)
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
        table = concat_records(tables)
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
        if _HEADERS in table.schema.names and table.column(_HEADERS).null_count < len(table):
            columns[_HEADERS] = table.column(_HEADERS).to_numpy(zero_copy_only=False)
        parts.append(columns)
    if not packed.all():
        plain = frame[~packed]
        columns = {name: plain[name].to_numpy(dtype=dtype)
                   for name, dtype in zip(RECORD_FIELDS, _RECORD_DTYPES)}
        if _HEADERS in plain and plain[_HEADERS].notna().any():
            columns[_HEADERS] = plain[_HEADERS].to_numpy(dtype=object)
        parts.append(columns)
    if len(parts) == 1:
        return parts[0]
    out = {  # the codes of the packed part are left out
        name: np.concatenate([p[name] for p in parts]) if parts else np.empty(0, dtype)
        for name, dtype in zip(RECORD_FIELDS, _RECORD_DTYPES)
    }
    if any(_HEADERS in p for p in parts):
        out[_HEADERS] = np.concatenate([
            p[_HEADERS] if _HEADERS in p else np.full(len(p["offset"]), None, dtype=object)
            for p in parts])
    return out


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


def _ordered(frame: Columns | pd.DataFrame, repartition_topics: Collection[str] = (),
             global_topics: Collection[str] = ()) -> SourceBatch:
    """The task's records in processing order (:mod:`kspark.runtime.partition_group`), as
    columns, without a Python object per record."""
    topics = np.asarray(frame["topic"], dtype=object)
    order, names = processing_order(
        topics, np.asarray(frame["offset"], dtype=np.int64),
        np.asarray(frame["timestamp"], dtype=np.int64), repartition_topics, global_topics)
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

    headers: list[Headers] | None = None
    if _HEADERS in frame:
        headers = [() if h is None else decode_headers(h)
                   for h in column(_HEADERS, object).tolist()]
        if not any(headers):
            headers = None
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
        headers,
    )
