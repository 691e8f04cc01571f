"""Directories of files as topics: sources through Spark's Python streaming data source API, and
sinks that write each micro-batch once (one file per batch and topic, named by batch id).

Record order is the order of file names, then of lines (rows) within a file; that order gives
each record its offset: ``file_index * 2**32 + line``.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any

from kspark.errors import BadInputError
from kspark.hashing import kafka_partition
from kspark.io.location import AppView, TopicLocation
from kspark.io.schema import SINK_SCHEMA, sink_rows
from kspark.io.typed import TIMESTAMP_MS, TypedLayout, layout_for

FORMATS = ("jsonl", "parquet", "kspark")
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

    def write_batch(
        self, batch_id: int, records: list[tuple[bytes | None, bytes | None, int, int]]
    ) -> None:
        """Write one micro-batch's ``(key, value, timestamp, partition)`` records, replacing
        the file of the same batch if a replay wrote it before."""
        if not records:
            return
        if self.format == "parquet":
            import pyarrow as pa

            columns = [list(c) for c in zip(*records)]
            self._write_parquet(batch_id, pa.table(columns, schema=SINK_SCHEMA))
            return
        os.makedirs(self.path, exist_ok=True)
        tmp = os.path.join(self.path, f".batch-{batch_id:012d}.jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for key, value, ts, part in records:
                row = {**_text("key", key), **_text("value", value), "timestamp": ts,
                       "partition": part}
                f.write(json.dumps(row) + "\n")
        os.replace(tmp, os.path.join(self.path, f"batch-{batch_id:012d}.jsonl"))

    def write_table(self, batch_id: int, table: Any) -> None:
        """:meth:`write_batch` of an Arrow table with columns key, value, timestamp and
        partition (a Parquet topic writes it as it is; a typed one its typed columns)."""
        if self._layout is not None:
            if table.num_rows:
                self._write_typed(batch_id, self._layout.decode(table))
        elif self.format != "parquet":
            self.write_batch(batch_id, sink_rows(table))
        elif table.num_rows:
            self._write_parquet(batch_id, table.cast(SINK_SCHEMA))

    def _write_typed(self, batch_id: int, table: Any) -> None:
        if self.format == "parquet":
            self._write_parquet(batch_id, table)
            return
        os.makedirs(self.path, exist_ok=True)
        tmp = os.path.join(self.path, f".batch-{batch_id:012d}.jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for row in json_rows(table):
                f.write(json.dumps(row, default=_json_value) + "\n")
        os.replace(tmp, os.path.join(self.path, f"batch-{batch_id:012d}.jsonl"))

    def _write_parquet(self, batch_id: int, table: Any) -> None:
        import pyarrow.parquet as pq

        os.makedirs(self.path, exist_ok=True)
        tmp = os.path.join(self.path, f".batch-{batch_id:012d}.parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, os.path.join(self.path, f"batch-{batch_id:012d}.parquet"))

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
