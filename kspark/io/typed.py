"""Typed results: a sink topic's records decoded with the topic's serdes into typed columns.

:func:`column_for` is the one place that says which column each serde kind becomes: ``String``
-> string, ``Long`` -> int64, ``Double`` -> float64, ``Bytes`` -> binary, ``Json`` -> its JSON
text (or, with a schema, the schema's type); a Schema Registry serde with a schema -> that
schema's type (an Avro record, a Protobuf message, a JSON schema's object: a struct); any other
serde is deserialized record by record and kept as JSON text (or as the schema's type). A
windowed key becomes ``key`` plus ``window_start``/``window_end`` (UTC timestamps) and
``window_start_ms``/``window_end_ms``.
Every result also has ``timestamp`` (UTC), ``timestamp_ms`` and ``partition``; an update stream
(a ``KTable.to_stream()``) has ``is_tombstone``. Known serdes decode a column at a time with
Arrow. A result that does not fit its column raises :class:`~kspark.errors.StreamsError`
naming the topic and the column.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from numbers import Real
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kspark._duration import whole
from kspark.errors import SerializationError, StreamsError
from kspark.io.schema import SINK_SCHEMA
from kspark.serdes import (
    MAX_LONG,
    Bytes,
    Double,
    Json,
    Long,
    Serde,
    SessionWindowed,
    String,
    TimeWindowed,
)
from kspark.serdes.registry import SchemaRegistrySerde
from kspark.topology.topology import ProcessorNode, SinkNode, SourceNode, Topology
from kspark.windows import Windowed

KEY, VALUE, TIMESTAMP, TIMESTAMP_MS = "key", "value", "timestamp", "timestamp_ms"
WINDOW_START, WINDOW_END = "window_start", "window_end"
WINDOW_START_MS, WINDOW_END_MS = "window_start_ms", "window_end_ms"
PARTITION, IS_TOMBSTONE = "partition", "is_tombstone"
#: the type of every timestamp column (Spark reads it as ``timestamp``)
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")


class ColumnError(ValueError):
    """A value that does not fit its column (``column``: its path, e.g. ``value.page``)."""

    def __init__(self, column: str, problem: str) -> None:
        super().__init__(f"column {column!r}: {problem}")
        self.column, self.problem = column, problem


class Column:
    """How one serde's bytes (and its deserialized values) become one Arrow column."""

    def __init__(self, serde: Serde, arrow_type: pa.DataType) -> None:
        self.serde, self.type = serde, arrow_type

    def from_bytes(self, data: pa.Array, name: str) -> pa.Array:
        """The column of ``data`` (binary, maybe null): record by record, through the serde."""
        values = []
        for raw in data.to_pylist():
            try:
                values.append(self.serde.deserialize(raw))
            except SerializationError as exc:
                raise ColumnError(name, str(exc)) from exc
        return self.from_values(values, name)

    def from_values(self, values: Sequence[Any], name: str) -> pa.Array:
        """The column of deserialized ``values``."""
        return convert(values, self.type, name)


class _Utf8(Column):
    """Bytes that are UTF-8 text (``String``; ``Json`` without a schema: its JSON text)."""

    def from_bytes(self, data: pa.Array, name: str) -> pa.Array:
        try:
            return pc.cast(data, pa.string())
        except pa.ArrowInvalid as exc:
            raise ColumnError(name, f"{self.serde.name} bytes are not UTF-8 text: {exc}") from exc

    def from_values(self, values: Sequence[Any], name: str) -> pa.Array:
        if isinstance(self.serde, Json):
            values = [None if v is None else json.dumps(v, separators=(",", ":"))
                      for v in values]
        return convert(values, self.type, name)


class _BigEndian(Column):
    """8-byte big-endian numbers (``Long``, ``Double``)."""

    def from_bytes(self, data: pa.Array, name: str) -> pa.Array:
        return big_endian(data, ">i8" if self.type == pa.int64() else ">f8", name,
                          self.serde.name)


class _Raw(Column):
    def from_bytes(self, data: pa.Array, name: str) -> pa.Array:
        return data


def column_for(serde: Serde, schema: Any = None) -> Column:
    """The column a (not windowed) serde's data becomes; ``schema`` (an Arrow type or schema,
    or a Spark type) types a ``Json`` or other serde's values instead of their JSON text."""
    if schema is not None and not isinstance(serde, String | Long | Double | Bytes):
        return Column(serde, arrow_type(schema))
    if isinstance(serde, SchemaRegistrySerde) and (typed := serde.column_type()) is not None:
        return _Registry(serde, typed)
    if isinstance(serde, String | Json):
        return _Utf8(serde, pa.string())
    if isinstance(serde, Long):
        return _BigEndian(serde, pa.int64())
    if isinstance(serde, Double):
        return _BigEndian(serde, pa.float64())
    if isinstance(serde, Bytes):
        return _Raw(serde, pa.binary())
    return _AsJson(serde, pa.string())


class _Registry(Column):
    """A Schema Registry serde's values as its schema's type (an Avro record, a Protobuf
    message, a JSON schema's object: a struct)."""

    serde: SchemaRegistrySerde

    def from_values(self, values: Sequence[Any], name: str) -> pa.Array:
        return convert([self.serde.plain(v) for v in values], self.type, name)


class _AsJson(Column):
    """Any other serde: its values as JSON text."""

    def from_values(self, values: Sequence[Any], name: str) -> pa.Array:
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values],
                        pa.string())


class KeyColumns:
    """The columns of a key: ``key`` (and, for a windowed serde, the window's columns)."""

    def __init__(self, serde: Serde, schema: Any = None) -> None:
        self.serde = serde
        self.windowed = isinstance(serde, SessionWindowed | TimeWindowed)
        self.inner = column_for(serde.inner if self.windowed else serde, schema)  # type: ignore[attr-defined]

    def fields(self) -> list[pa.Field]:
        out = [pa.field(KEY, self.inner.type)]
        if self.windowed:
            out += [pa.field(WINDOW_START, TIMESTAMP_TYPE), pa.field(WINDOW_END, TIMESTAMP_TYPE),
                    pa.field(WINDOW_START_MS, pa.int64()), pa.field(WINDOW_END_MS, pa.int64())]
        return out

    def from_bytes(self, data: pa.Array) -> list[pa.Array]:
        if not self.windowed:
            return [self.inner.from_bytes(data, KEY)]
        suffix = self.serde.partition_suffix_bytes
        lengths = pc.binary_length(data)
        short = pc.index(pc.less(lengths, suffix), True).as_py()
        if short >= 0:
            raise ColumnError(KEY, f"{self.serde.name} key of {lengths[short].as_py()} bytes "
                                   f"is shorter than its {suffix}-byte window")
        inner = self.inner.from_bytes(pc.binary_slice(data, 0, -suffix), KEY)
        start = big_endian(pc.binary_slice(data, -8), ">i8", KEY, self.serde.name)
        if isinstance(self.serde, SessionWindowed):
            end = big_endian(pc.binary_slice(data, -16, -8), ">i8", KEY, self.serde.name)
        else:  # as the serde: the end cut at Long.MAX_VALUE
            size = self.serde.window_size  # type: ignore[attr-defined]
            end = pc.if_else(pc.greater(start, MAX_LONG - size), MAX_LONG, pc.add(start, size))
        return self._with_window(inner, start, end)

    def from_values(self, keys: Sequence[Any]) -> list[pa.Array]:
        if not self.windowed:
            return [self.inner.from_values(keys, KEY)]
        inner = self.inner.from_values([None if k is None else k.key for k in keys], KEY)
        start = pa.array([None if k is None else k.window.start for k in keys], pa.int64())
        end = pa.array([None if k is None else k.window.end for k in keys], pa.int64())
        return self._with_window(inner, start, end)

    @staticmethod
    def _with_window(inner: pa.Array, start: pa.Array, end: pa.Array) -> list[pa.Array]:
        if pc.any(pc.less(start, 0)).as_py():
            raise ColumnError(WINDOW_START, "a window starts before 0")
        return [inner, start.cast(TIMESTAMP_TYPE), end.cast(TIMESTAMP_TYPE), start, end]


def big_endian(data: pa.Array, dtype: str, name: str, serde: str) -> pa.Array:
    """8-byte big-endian numbers (``dtype`` ``>i8`` or ``>f8``) of a binary column, vectorised."""
    try:
        fixed = pc.cast(data, pa.binary(8))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        lengths = pc.binary_length(data)
        bad = pc.index(pc.not_equal(lengths, 8), True).as_py()
        size = lengths[bad].as_py() if bad >= 0 else "?"
        raise ColumnError(name, f"size of data received by {serde} deserializer is not 8 but "
                                f"{size}") from exc
    if isinstance(fixed, pa.ChunkedArray):
        fixed = fixed.combine_chunks()
    buffer = fixed.buffers()[1]
    raw = (np.frombuffer(buffer, dtype=dtype, count=len(fixed), offset=fixed.offset * 8)
           if buffer is not None else np.zeros(len(fixed), dtype))
    mask = fixed.is_null().to_numpy(zero_copy_only=False) if fixed.null_count else None
    return pa.array(raw.astype(dtype[1:]), mask=mask)


# -- user schemas ----------------------------------------------------------------------------
_SPARK_TYPES = {
    "string": pa.string(), "long": pa.int64(), "integer": pa.int32(), "short": pa.int16(),
    "byte": pa.int8(), "double": pa.float64(), "float": pa.float32(), "boolean": pa.bool_(),
    "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def arrow_type(schema: Any) -> pa.DataType:
    """An Arrow type of a user's schema: an Arrow type, an Arrow schema (a struct of its
    fields) or a Spark type (anything with Spark's ``jsonValue()``)."""
    if isinstance(schema, pa.DataType):
        return schema
    if isinstance(schema, pa.Schema):
        return pa.struct(list(schema))
    if hasattr(schema, "jsonValue"):
        return _from_spark_json(schema.jsonValue())
    raise TypeError(f"a schema must be an Arrow type or schema or a Spark type, got {schema!r}")


def _from_spark_json(spec: Any) -> pa.DataType:
    if isinstance(spec, str):
        if spec in _SPARK_TYPES:
            return _SPARK_TYPES[spec]
        if spec.startswith("decimal("):
            precision, scale = spec[8:-1].split(",")
            return pa.decimal128(int(precision), int(scale))
        raise TypeError(f"Spark type {spec!r} has no column type here")
    kind = spec["type"]
    if kind == "struct":
        return pa.struct([pa.field(f["name"], _from_spark_json(f["type"]))
                          for f in spec["fields"]])
    if kind == "array":
        return pa.list_(_from_spark_json(spec["elementType"]))
    if kind == "map":
        return pa.map_(_from_spark_json(spec["keyType"]), _from_spark_json(spec["valueType"]))
    raise TypeError(f"Spark type {kind!r} has no column type here")


def convert(values: Sequence[Any], arrow_type: pa.DataType, name: str) -> pa.Array:
    """``values`` as an Arrow column of ``arrow_type``; a value with a field the type lacks,
    or of another kind, raises :class:`ColumnError` naming the nested column."""
    for value in values:
        _check(value, arrow_type, name)
    try:
        return pa.array(list(values), arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise ColumnError(name, f"cannot hold the results: {exc}") from exc


def _check(value: Any, t: pa.DataType, path: str) -> None:
    if value is None:
        return
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise ColumnError(path, f"{_short(value)} is not an object for {t}")
        names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        for key, item in value.items():
            if key not in names:
                raise ColumnError(f"{path}.{key}", f"the schema has no field {key!r} "
                                                   f"(its fields: {', '.join(names)})")
            _check(item, names[key], f"{path}.{key}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(value, list):
            raise ColumnError(path, f"{_short(value)} is not a list for {t}")
        for item in value:
            _check(item, t.value_type, f"{path}[]")
    elif pa.types.is_integer(t) and whole(value) is None:
        raise ColumnError(path, f"{_short(value)} is not a whole number for {t}")
    elif pa.types.is_floating(t) and (isinstance(value, bool)
                                      or not isinstance(value, Real)):
        raise ColumnError(path, f"{_short(value)} is not a number for {t}")
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not isinstance(value, str):
        raise ColumnError(path, f"{_short(value)} is not text for {t}")
    elif pa.types.is_boolean(t) and not isinstance(value, bool):
        raise ColumnError(path, f"{_short(value)} is not a boolean")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the layout of a topic -------------------------------------------------------------------
@dataclass
class TypedLayout:
    """The typed columns of one sink topic's results."""

    topic: str
    key: KeyColumns
    value: Column
    tombstones: bool

    @property
    def schema(self) -> pa.Schema:
        fields = [*self.key.fields(), pa.field(VALUE, self.value.type)]
        if self.tombstones:
            fields.append(pa.field(IS_TOMBSTONE, pa.bool_()))
        return pa.schema([*fields, pa.field(TIMESTAMP, TIMESTAMP_TYPE),
                          pa.field(TIMESTAMP_MS, pa.int64()), pa.field(PARTITION, pa.int32())])

    def decode(self, table: pa.Table) -> pa.Table:
        """The typed table of ``table``'s raw records (key, value, timestamp, partition)."""
        table = table.select(SINK_SCHEMA.names).cast(SINK_SCHEMA).combine_chunks()
        try:
            keys = self.key.from_bytes(_array(table, KEY))
            values = self.value.from_bytes(_array(table, VALUE), VALUE)
        except ColumnError as exc:
            raise self.error(exc) from exc
        return self._assemble(keys, values, _array(table, TIMESTAMP), _array(table, PARTITION))

    def from_records(self, keys: Sequence[Any], values: Sequence[Any], timestamps: Sequence[int],
                     partitions: Sequence[int]) -> pa.Table:
        """The typed table of deserialized records."""
        try:
            key_columns = self.key.from_values(keys)
            value_column = self.value.from_values(values, VALUE)
        except ColumnError as exc:
            raise self.error(exc) from exc
        return self._assemble(key_columns, value_column, pa.array(timestamps, pa.int64()),
                              pa.array(partitions, pa.int32()))

    def _assemble(self, keys: list[pa.Array], values: pa.Array, stamps: pa.Array,
                  partitions: pa.Array) -> pa.Table:
        columns = [*keys, values]
        if self.tombstones:
            columns.append(values.is_null())
        columns += [stamps.cast(TIMESTAMP_TYPE), stamps, partitions]
        return pa.Table.from_arrays(columns, schema=self.schema)

    def error(self, exc: ColumnError) -> StreamsError:
        return StreamsError(f"sink topic {self.topic!r}, column {exc.column!r}: {exc.problem}")


def _array(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _writers(topology: Topology, topic: str) -> list[SinkNode]:
    """The sink nodes that write ``topic``: those naming it, else those choosing their topic
    per record (a topic extractor may choose it)."""
    sinks = [n for n in topology.nodes.values() if isinstance(n, SinkNode)]
    return ([n for n in sinks if n.topic == topic]
            or [n for n in sinks if n.topic_extractor is not None])


def sink_serdes(topology: Topology, topic: str, default_key: Serde, default_value: Serde
                ) -> tuple[Serde, Serde] | None:
    """The serdes the topology writes ``topic`` with (a sink node's, else the defaults), or
    ``None`` if no sink node writes it (changelogs, dead letters, repartition topics)."""
    nodes = _writers(topology, topic)
    if not nodes or topic in topology.internal_topics:
        return None
    key = next((n.key_serde for n in nodes if n.key_serde is not None), default_key)
    value = next((n.value_serde for n in nodes if n.value_serde is not None), default_value)
    return key, value


def is_update_stream(topology: Topology, topic: str) -> bool:
    """Whether ``topic`` is written from a table's changes (``KTable.to_stream``, upstream of
    a sink node of the topic, through repartition topics too): its values may be tombstones."""
    from kspark.dsl.internals.processors import TableToStreamProcessor

    pending = [n.name for n in _writers(topology, topic)]
    seen: set[str] = set()
    while pending:
        node = topology.nodes[pending.pop()]
        if node.name in seen:
            continue
        seen.add(node.name)
        if isinstance(node, ProcessorNode):
            supplier = node.supplier
            while isinstance(supplier, partial):
                supplier = supplier.func
            if supplier is TableToStreamProcessor:
                return True
        if isinstance(node, SourceNode):
            pending += [n.name for n in topology.nodes.values()
                        if isinstance(n, SinkNode) and n.topic in node.topics]
        else:
            pending += node.parents
    return False


def layout_for(app: Any, topic: str, key_schema: Any = None, value_schema: Any = None
               ) -> TypedLayout | None:
    """The typed layout of sink topic ``topic`` of ``app`` (a StreamsApp: its topology and
    default serdes), or ``None`` for a topic that keeps raw bytes (no sink node writes it)."""
    serdes = sink_serdes(app.topology, topic, app.config.default_key_serde,
                         app.config.default_value_serde)
    if serdes is None:
        return None
    return TypedLayout(topic, KeyColumns(serdes[0], key_schema),
                       column_for(serdes[1], value_schema), is_update_stream(app.topology, topic))


# -- store contents --------------------------------------------------------------------------
def store_table(pairs: Sequence[Any]) -> pa.Table:
    """``key``, the window's columns for windowed keys, and ``value`` of a store's
    ``(key, value)`` pairs, each column typed by its values (:func:`infer_column`)."""
    keys = [kv[0] for kv in pairs]
    windowed = bool(keys) and all(isinstance(k, Windowed) for k in keys)
    inner = [k.key for k in keys] if windowed else keys
    key = infer_column(inner)
    columns = {KEY: key}
    if windowed:
        starts = pa.array([k.window.start for k in keys], pa.int64())
        ends = pa.array([k.window.end for k in keys], pa.int64())
        columns.update(zip((WINDOW_START, WINDOW_END, WINDOW_START_MS, WINDOW_END_MS),
                           KeyColumns._with_window(key, starts, ends)[1:]))
    columns[VALUE] = infer_column([kv[1] for kv in pairs])
    return pa.table(columns)


def infer_column(values: Sequence[Any]) -> pa.Array:
    """A column of Python values: booleans, whole numbers (int64), numbers (float64), text or
    bytes as such; anything else (lists, dicts, mixed kinds) as JSON text."""
    kinds = {type(v) for v in values if v is not None}
    for types, arrow in (({bool}, pa.bool_()), ({int}, pa.int64()), ({int, float}, pa.float64()),
                         ({str}, pa.string()), ({bytes}, pa.binary())):
        if kinds and kinds <= types:
            return pa.array(list(values), arrow)
    return pa.array([None if v is None else json.dumps(v, default=_json_default)
                     for v in values], pa.string())


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return str(value)
