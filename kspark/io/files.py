"""Directories of files as topics: sources through Spark's Python streaming data source API, and
sinks that write each micro-batch once (one file per batch and topic, named by batch id).

Record order is the order of file names, then of lines (rows) within a file; that order gives
each record its offset: ``file_index * 2**32 + line``.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kspark.errors import BadInputError
from kspark.hashing import kafka_partition
from kspark.io.location import AppView, PartitionWriter, TopicLocation
from kspark.io.record_files import read_record_file
from kspark.io.schema import SINK_SCHEMA, sink_rows
from kspark.io.typed import TIMESTAMP_MS, TypedLayout, layout_for

FORMATS = ("jsonl", "parquet", "kspark")
#: where executors write a sink's files until the driver publishes their batch
STAGING = "_staging"
OFFSET_STRIDE = 1 << 32


@dataclass
class FileTopic(TopicLocation):
    """A topic kept as a directory of files.

    As a source: ``format`` "jsonl" (one JSON object per line) or "parquet" (one record per row)
    reads ``key_field`` (UTF-8 text of its value) as the key, ``timestamp_field`` (epoch ms) as
    the timestamp and the whole row as JSON (or ``value_field`` alone) as the value; "kspark"
    reads files that kspark's own sinks wrote. ``partitions`` spreads records over partitions
    by key with Kafka's default partitioner. As a sink: writes each batch's records to
    ``batch-<id>.<ext>``, decoded with the topic's serdes into typed columns
    (:mod:`kspark.io.typed`; ``key_schema``/``value_schema`` type ``Json`` data), or with
    ``typed=False``, format "kspark", and for topics no sink node writes (changelogs, dead
    letters), raw: key and value bytes, timestamp and partition.
    """

    path: str
    format: str = "jsonl"
    key_field: str = "key"
    value_field: str | None = None
    timestamp_field: str = "timestamp"
    partitions: int = 1
    max_files_per_trigger: int | None = None
    typed: bool = True
    key_schema: Any = None
    value_schema: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._layout: TypedLayout | None = None
        if self.format not in FORMATS:
            raise ValueError(
                f"file topic {self.path!r}: format must be one of {FORMATS}, got {self.format!r}"
            )
        if self.partitions < 1:
            raise ValueError(f"file topic {self.path!r}: partitions must be >= 1")
        self.path = os.path.abspath(self.path)

    @property
    def num_partitions(self) -> int:
        return self.partitions

    def source_options(self, topic: str) -> dict[str, str]:
        opts = {
            "path": self.path,
            "format": self.format,
            "key_field": self.key_field,
            "timestamp_field": self.timestamp_field,
            "partitions": str(self.partitions),
            "topic": topic,
        }
        if self.value_field:
            opts["value_field"] = self.value_field
        if self.max_files_per_trigger:
            opts["max_files_per_trigger"] = str(self.max_files_per_trigger)
        return opts

    # -- sink ----------------------------------------------------------------------------------
    def prepare(self, app: AppView, topic: str) -> None:
        """Find the typed layout of a sink topic (none: raw records)."""
        self._layout = None
        if self.typed and self.format != "kspark":
            self._layout = layout_for(app, topic, self.key_schema, self.value_schema)

    def partition_writer(self) -> PartitionWriter | None:
        """The executors write each partition of a batch to its own file, published at once by
        the driver when all are written (see :class:`FilePartitionWriter`)."""
        return FilePartitionWriter(self)

    def write_batch(
        self, batch_id: int, records: list[tuple[bytes | None, bytes | None, int, int]]
    ) -> None:
        """Write ``(key, value, timestamp, partition)`` records as the file of batch
        ``batch_id``, replacing the file of the same batch if a replay wrote it before."""
        if records:
            import pyarrow as pa

            columns = [list(c) for c in zip(*records)]
            self.write_file(self.path, batch_stem(batch_id), pa.table(columns, schema=SINK_SCHEMA))

    def write_file(self, directory: str, stem: str, table: Any) -> None:
        """Write an Arrow table of records (key, value, timestamp, partition) to file
        ``<directory>/<stem>.<ext>`` at once (a temporary file renamed): as it is for Parquet,
        its typed columns for a typed topic, else raw JSON lines."""
        if not table.num_rows:
            return
        if self._layout is not None:
            table = self._layout.decode(table)
        elif self.format == "parquet":
            table = table.cast(SINK_SCHEMA)
        os.makedirs(directory, exist_ok=True)
        ext = "parquet" if self.format == "parquet" else "jsonl"
        tmp = os.path.join(directory, f".{stem}.{ext}.tmp")
        if ext == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                if self._layout is not None:
                    for row in json_rows(table):
                        f.write(json.dumps(row, default=_json_value) + "\n")
                else:
                    for key, value, ts, part in sink_rows(table):
                        row = {**_text("key", key), **_text("value", value), "timestamp": ts,
                               "partition": part}
                        f.write(json.dumps(row) + "\n")
        os.replace(tmp, os.path.join(directory, f"{stem}.{ext}"))

    def read_records(self) -> list[dict[str, Any]]:
        """Everything kspark's sink wrote here, in batch order (for tests and tools): typed rows
        as written, raw ones with key and value bytes."""
        out: list[dict[str, Any]] = []
        if not os.path.isdir(self.path):
            return out
        for name in list_data_files(self.path):
            full = os.path.join(self.path, name)
            if name.endswith(".parquet"):
                import pyarrow.parquet as pq

                out.extend(pq.read_table(full).to_pylist())
            else:
                with open(full, encoding="utf-8") as f:
                    rows = [json.loads(line) for line in f if line.strip()]
                out.extend(r if TIMESTAMP_MS in r else _from_text(r) for r in rows)
        return out


def json_rows(table: Any) -> list[dict[str, Any]]:
    """The rows of a typed table for JSON lines: timestamps as ISO-8601 text in UTC with
    milliseconds (``1970-01-01T00:00:01.000Z``, which Spark reads as a timestamp), bytes as
    base64 text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in table.columns:
        if pa.types.is_timestamp(column.type) and column.type.unit == "ms":
            column = pc.strftime(column, format="%Y-%m-%dT%H:%M:%SZ")
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names).to_pylist()


def _json_value(value: Any) -> Any:
    """JSON of the values ``json`` does not know: dates and times, bytes, decimals."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return str(value)


def _text(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode()}


def _from_text(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for name in ("key", "value"):
        if f"{name}_b64" in out:
            out[name] = base64.b64decode(out.pop(f"{name}_b64"))
        elif out.get(name) is not None:
            out[name] = out[name].encode("utf-8")
    return out


def batch_stem(batch_id: int, partition: int | None = None) -> str:
    """A sink file's name without extension: ``batch-<id>``, or ``batch-<id>-<partition>`` for
    one Spark partition's records of the batch (names sort in batch, then partition order)."""
    stem = f"batch-{batch_id:012d}"
    return stem if partition is None else f"{stem}-{partition:05d}"


class FilePartitionWriter(PartitionWriter):
    """Writes a file topic's records from the executors: each Spark partition of a batch to
    ``_staging/batch-<id>-<partition>.<ext>`` under the topic's directory (a replay overwrites
    it), and the driver publishes the batch's files into the directory in name order, so that
    readers see files appear only at the end of the listing."""

    def __init__(self, topic: FileTopic) -> None:
        self.topic = topic

    @property
    def staging(self) -> str:
        return os.path.join(self.topic.path, STAGING)

    def write(self, batch_id: int, run: str, partition: int, tables: Mapping[str, Any]
              ) -> dict[str, int]:
        count = 0
        for table in tables.values():
            self.topic.write_file(self.staging, batch_stem(batch_id, partition), table)
            count += table.num_rows
        return {"sink.records.written": count}

    def publish(self, batch_id: int, run: str) -> None:
        if not os.path.isdir(self.staging):
            return
        prefix = batch_stem(batch_id) + "-"
        for name in sorted(os.listdir(self.staging)):
            if name.startswith(prefix):
                os.replace(os.path.join(self.staging, name), os.path.join(self.topic.path, name))


def list_data_files(path: str) -> list[str]:
    """Data files of a directory in name order (hidden and temporary files skipped)."""
    return sorted(
        n
        for n in os.listdir(path)
        if not n.startswith((".", "_")) and n.endswith((".jsonl", ".json", ".parquet"))
    )


#: the timestamp of a row that is no record (see :func:`file_rows`): the task skips it, counted
INVALID_TIMESTAMP = -1


def file_rows(
    path: str,
    fmt: str,
    key_field: str,
    value_field: str | None,
    timestamp_field: str,
    partitions: int,
    skip_invalid: bool = False,
) -> tuple[list, list, list, list]:
    """Read one file into key bytes, value bytes, timestamps and partitions. A row without a
    usable timestamp (missing, not a whole number) raises :class:`~kspark.errors.BadInputError`
    naming the file, line, field and value; with ``skip_invalid`` it becomes a record with the
    raw row as value and timestamp :data:`INVALID_TIMESTAMP`, which the task skips and counts
    (and dead-letters) as the deserialization handler ``log_and_continue`` says."""
    if fmt == "kspark":
        columns = read_record_file(path, partitions)
        if columns is not None:
            return columns
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    stamps: list[int] = []
    parts: list[int] = []
    if fmt in ("jsonl", "kspark"):
        with open(path, encoding="utf-8") as f:
            rows: list[Any] = []
            for line_no, line in enumerate(f):
                if not line.strip():
                    rows.append(None)
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    rows.append(_Malformed(line.rstrip("\n").encode(), str(exc), line_no))
    else:
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    for line_no, row in enumerate(rows):
        if row is None:
            continue
        if fmt == "kspark":
            row = _from_text(row)
            key, value, ts, part = row["key"], row["value"], row["timestamp"], row["partition"]
            if not 0 <= int(part) < partitions:
                raise BadInputError(
                    f"source file {path} line {line_no + 1}: a record of partition {part}, but "
                    f"the file topic has {partitions} partition(s): give io.files(..., "
                    f"partitions=N) with the partitions its writer had")
        elif isinstance(row, _Malformed):
            key, value, ts = None, row.raw, 0
            part = 0
        else:
            if not isinstance(row, dict):
                raise BadInputError(f"source file {path} line {line_no + 1}: not a JSON object: "
                                    f"{_short(row)}")
            raw_key = row.get(key_field)
            key = None if raw_key is None else str(raw_key).encode("utf-8")
            payload = row if value_field is None else row.get(value_field)
            value = None if payload is None else json.dumps(payload, default=str).encode()
            problem = _timestamp_problem(row, timestamp_field)
            if problem is None:
                ts = int(row[timestamp_field])
            elif skip_invalid:
                ts, value = INVALID_TIMESTAMP, json.dumps(row, default=str).encode()
            else:
                raise BadInputError(f"source file {path} line {line_no + 1}: {problem}")
            part = 0 if key is None or partitions == 1 else kafka_partition(key, partitions)
        keys.append(key)
        values.append(value)
        stamps.append(int(ts))
        parts.append(int(part))
    return keys, values, stamps, parts


def _timestamp_problem(row: dict[str, Any], field: str) -> str | None:
    """What keeps ``row[field]`` from being a record timestamp, or ``None``."""
    if field not in row:
        return f"no timestamp field {field!r} (fields: {', '.join(map(repr, row)) or 'none'})"
    value = row[field]
    if value is None:
        return f"timestamp field {field!r} is null"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"timestamp field {field!r} is not a whole number: {_short(value)}"
    if isinstance(value, float) and not value.is_integer():
        return f"timestamp field {field!r} is not a whole number: {_short(value)}"
    if isinstance(value, str):
        try:
            int(value)
        except ValueError:
            return f"timestamp field {field!r} is not a whole number: {_short(value)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Malformed:
    """A line that is not JSON: passed on as raw bytes so the value serde reports it (with
    topic, partition and offset) under the configured error handler."""

    def __init__(self, raw: bytes, error: str, line: int) -> None:
        self.raw, self.error, self.line = raw, error, line
