"""Results as DataFrames: ``app.output(topic)`` (the typed records a sink topic holds) and
``app.store(name).to_frame()`` (a store's contents)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from kspark.errors import StreamsError
from kspark.io.files import FileTopic, list_data_files
from kspark.io.kafka import KafkaTopic
from kspark.io.memory import MemoryTopic
from kspark.io.schema import SINK_SCHEMA
from kspark.io.typed import TypedLayout, layout_for, store_table
from kspark.spark.internals.query import _local
from kspark.spark.internals.table_sinks import ForeachBatchSink, TableSink
from kspark.state.views import ReadOnlyStoreView


def frame_of(spark: Any, table: pa.Table) -> Any:
    """A DataFrame of an Arrow table (its types as Spark maps them: timestamps with a time
    zone become ``timestamp``, int64 ``bigint``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table, schema=from_arrow_schema(table.schema))


def output_frame(app: Any, topic: str) -> Any:
    """The typed records written so far to sink topic ``topic`` of ``app`` as a DataFrame: a
    table sink's table, a file sink's files (raw ones decoded), a memory sink's records, a Kafka
    topic's committed records."""
    sinks = app.topology.external_sink_topics()
    if topic not in sinks:
        raise StreamsError(f"application {app.application_id!r}: {topic!r} is not a sink topic "
                           f"(its sink topics: {', '.join(sinks) or 'none'})")
    location = app.topics.get(topic)
    if isinstance(location, TableSink):
        return location.frame()
    if isinstance(location, ForeachBatchSink):
        raise StreamsError(f"sink topic {topic!r} goes to a function (foreach_batch): kspark "
                           "keeps no copy of its results")
    layout = layout_for(app, topic, getattr(location, "key_schema", None),
                        getattr(location, "value_schema", None))
    assert layout is not None  # every external sink topic has a sink node
    spark = app.spark
    if isinstance(location, MemoryTopic):
        return frame_of(spark, layout.decode(_raw(location.raw_records())))
    if isinstance(location, FileTopic):
        if location.typed and location.format != "kspark":
            return _typed_files(spark, location, layout)
        rows = [(r["key"], r["value"], r["timestamp"], r["partition"])
                for r in location.read_records()]
        return frame_of(spark, layout.decode(_raw(rows)))
    if isinstance(location, KafkaTopic):
        return frame_of(spark, layout.decode(_raw(_kafka_records(location, topic))))
    raise StreamsError(f"sink topic {topic!r}: no results can be read from {location!r}")


def _raw(rows: list[tuple[Any, ...]]) -> pa.Table:
    columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in SINK_SCHEMA]
    return pa.table(columns, schema=SINK_SCHEMA)


def _typed_files(spark: Any, location: FileTopic, layout: TypedLayout) -> Any:
    """A typed file sink's files, read with the layout's schema (none yet: no rows)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    local = _local(location.path)
    if local is not None and (not os.path.isdir(local) or not list_data_files(local)):
        return frame_of(spark, layout.schema.empty_table())
    reader = spark.read.schema(from_arrow_schema(layout.schema))
    if location.format == "parquet":
        return reader.parquet(location.path)
    return reader.json(location.path)


def _kafka_records(location: KafkaTopic, topic: str) -> list[tuple[Any, ...]]:
    """Every committed record of the Kafka topic (read as a ``read_committed`` consumer)."""
    from kspark.kafka.reader import read_to_end

    out = []
    for name in location.kafka_topics(topic):
        for m in read_to_end(location.bootstrap_servers, name, location.config):
            out.append((m.key(), m.value(), m.timestamp()[1], m.partition()))
    return out


# -- store views -----------------------------------------------------------------------------
class _ToFrame:
    """What a store view gets on Spark: :meth:`to_frame`."""

    _spark: Any

    def to_frame(self) -> Any:
        """The store's contents as a DataFrame: ``key`` (with ``window_start``, ``window_end``
        and their ``_ms`` columns for windowed stores) and ``value``, typed by the values
        (objects and lists as JSON text)."""
        view: Any = self
        return frame_of(self._spark, store_table(view.all()))


_FRAMED: dict[type, type] = {}


def with_frames(spark: Any, view: ReadOnlyStoreView) -> ReadOnlyStoreView:
    """``view`` with :meth:`_ToFrame.to_frame` reading through ``spark``."""
    cls = type(view)
    if cls not in _FRAMED:
        _FRAMED[cls] = type(cls.__name__, (_ToFrame, cls), {"__doc__": cls.__doc__})
    framed: ReadOnlyStoreView = object.__new__(_FRAMED[cls])
    framed.__dict__.update(vars(view))
    framed.__dict__["_spark"] = spark
    return framed
