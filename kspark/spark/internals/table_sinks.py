"""Spark tables and user functions as sinks: ``kspark.spark.table`` and ``foreach_batch``.

Each micro-batch's records, decoded into typed columns (:mod:`kspark.io.typed`), become one
DataFrame: a table sink appends it to a table of the session's catalog, a function sink hands it
to ``fn(df, batch_id)``. Spark replays the last batch after a restart if its commit was not
recorded; so each sink remembers the last batch it delivered in ``<checkpoint>/sinks/<topic>.json``
and skips a replayed one. A table sink also notes, before it appends, the table's files: if the
process dies after the append but before the note of the batch, the replay finds new files and
does not append again. Each append writes one file (its job's commit is one rename, never half
made), and a replay first removes what a killed append left in the table's ``_temporary``
folder (Hadoop's committer would otherwise move a task output committed there into the table
with the next append). A function sink cannot be checked so: a function that must never see a
batch twice uses ``batch_id``, the id Spark gives the batch, which stays the same on a replay.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kspark.errors import StreamsError
from kspark.io.location import AppView, TopicLocation
from kspark.io.schema import SINK_SCHEMA
from kspark.io.typed import TypedLayout, layout_for
from kspark.spark.internals.query import _local

#: where in the checkpoint directory the sinks note their last batch
MARKER_DIR = "sinks"


class BatchMarker:
    """A sink's note of its last delivered batch (``{"batch": id}``, with ``pending`` and
    ``files`` while a table append is under way), a JSON file beside the query's checkpoint."""

    def __init__(self, spark: Any, checkpoint_dir: str, topic: str) -> None:
        self.spark = spark
        self.path = f"{checkpoint_dir.rstrip('/')}/{MARKER_DIR}/{topic}.json"
        self.local = _local(self.path)

    def read(self) -> dict[str, Any]:
        if self.local is not None:
            if not os.path.isfile(self.local):
                return {}
            with open(self.local, encoding="utf-8") as f:
                return dict(json.load(f))
        fs, path = self._hadoop()
        if not fs.exists(path):
            return {}
        stream = fs.open(path)
        try:
            text = self.spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        return dict(json.loads(text))

    def write(self, state: dict[str, Any]) -> None:
        text = json.dumps(state, sort_keys=True)
        if self.local is not None:  # a new file renamed over the old one: never half written
            os.makedirs(os.path.dirname(self.local), exist_ok=True)
            tmp = self.local + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.local)
            return
        fs, path = self._hadoop()
        out = fs.create(path, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def _hadoop(self) -> tuple[Any, Any]:
        return _hadoop(self.spark, self.path)


def _hadoop(spark: Any, location: str) -> tuple[Any, Any]:
    """The Hadoop file system of ``location`` and its Hadoop path, through ``spark``'s JVM."""
    path = spark._jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


class SparkSink(TopicLocation):
    """A sink that hands each non-empty micro-batch to Spark as a DataFrame of typed records
    (raw records with ``typed=False`` and for topics no sink node writes), once."""

    not_over_connect = "a table or function sink writes through the app's own Spark session"

    def __init__(self, typed: bool = True, key_schema: Any = None,
                 value_schema: Any = None) -> None:
        self.typed, self.key_schema, self.value_schema = typed, key_schema, value_schema
        self.topic: str | None = None
        self._layout: TypedLayout | None = None
        self._app: Any = None
        self._marker: BatchMarker | None = None

    @property
    def num_partitions(self) -> int | None:
        return None

    def prepare(self, app: AppView, topic: str) -> None:
        self._app, self.topic = app, topic
        self._layout = (layout_for(app, topic, self.key_schema, self.value_schema)
                        if self.typed else None)
        self._marker = BatchMarker(self.spark, self._app.checkpoint_dir, topic)

    @property
    def spark(self) -> Any:
        if self._app is None:
            raise StreamsError(f"{self!r}: used before StreamsApp.start()")
        return self._app.spark

    @property
    def arrow_schema(self) -> pa.Schema:
        return self._layout.schema if self._layout is not None else SINK_SCHEMA

    def spark_schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.arrow_schema)

    def write_table(self, batch_id: int, table: Any) -> None:
        if not table.num_rows:
            return
        if self._marker is None:
            raise StreamsError(f"{self!r}: written before StreamsApp.start()")
        state = self._marker.read()
        if batch_id <= state.get("batch", -1):
            return  # a replay of a batch delivered before
        rows = (self._layout.decode(table) if self._layout is not None
                else table.select(SINK_SCHEMA.names).cast(SINK_SCHEMA))
        frame = self.spark.createDataFrame(rows, schema=self.spark_schema())
        self._deliver(frame, batch_id, state)
        self._marker.write({"batch": batch_id})

    def _deliver(self, frame: Any, batch_id: int, state: dict[str, Any]) -> None:
        raise NotImplementedError


class TableSink(SparkSink):
    """Appends each micro-batch to table ``name`` of the session's catalog (created at
    ``start()`` if missing: as ``format``, at ``path`` if given, else where the catalog puts
    it). An existing table must have the results' columns and types."""

    def __init__(self, name: str, path: str | None = None, format: str = "parquet",
                 typed: bool = True, key_schema: Any = None, value_schema: Any = None) -> None:
        super().__init__(typed, key_schema, value_schema)
        self.name, self.path, self.format = name, path, format
        self._columns: list[str] = []

    def __repr__(self) -> str:
        return f"TableSink({self.name!r}, path={self.path!r}, format={self.format!r})"

    def prepare(self, app: AppView, topic: str) -> None:
        super().prepare(app, topic)
        spark, schema = self.spark, self.spark_schema()
        if not spark.catalog.tableExists(self.name):
            kept = self.path or self._default_path()
            if kept is not None and self._has_data(kept):
                # kept data of a table the catalog forgot (e.g. a session's in-memory catalog)
                spark.catalog.createTable(self.name, path=kept, source=self.format)
            else:
                writer = spark.createDataFrame([], schema).write.format(self.format)
                if self.path is not None:
                    writer = writer.option("path", self.path)
                writer.saveAsTable(self.name)
        existing = spark.table(self.name).schema
        self._check(existing, schema)
        self._columns = [f.name for f in existing.fields]

    def _default_path(self) -> str | None:
        """Where the catalog puts a table of this (unqualified) name: the warehouse's."""
        if "." in self.name:
            return None
        warehouse = self.spark.conf.get("spark.sql.warehouse.dir")
        return f"{warehouse.rstrip('/')}/{self.name.lower()}"

    def _has_data(self, path: str) -> bool:
        local = _local(path)
        if local is not None:
            return os.path.isdir(local) and any(not n.startswith((".", "_"))
                                                for n in os.listdir(local))
        fs, hadoop_path = _hadoop(self.spark, path)
        return bool(fs.exists(hadoop_path))

    def _check(self, table: Any, results: Any) -> None:
        """Refuse a table whose columns differ from the results' (names and types)."""
        have = {f.name: f.dataType for f in table.fields}
        need = {f.name: f.dataType for f in results.fields}
        where = f"sink topic {self.topic!r}, table {self.name!r}"
        for name, kind in need.items():
            if name not in have:
                raise StreamsError(f"{where}, column {name!r}: not in the table (its columns: "
                                   f"{', '.join(have)})")
            if have[name].simpleString() != kind.simpleString():
                raise StreamsError(f"{where}, column {name!r}: the table has "
                                   f"{have[name].simpleString()}, the results are "
                                   f"{kind.simpleString()}")
        extra = [name for name in have if name not in need]
        if extra:
            raise StreamsError(f"{where}, column {extra[0]!r}: not among the results' columns "
                               f"({', '.join(need)})")

    def table_files(self) -> set[str]:
        self.spark.catalog.refreshTable(self.name)
        return set(self.spark.table(self.name).inputFiles())

    def _deliver(self, frame: Any, batch_id: int, state: dict[str, Any]) -> None:
        before = self.table_files()
        if state.get("pending") == batch_id:  # the process died during this batch's append
            self._remove_leftover()
            if before - set(state.get("files", [])):
                return  # appended before the process died, not noted yet
        assert self._marker is not None
        self._marker.write({**state, "pending": batch_id, "files": sorted(before)})
        frame.select(*self._columns).coalesce(1).write.insertInto(self.name)

    def location(self) -> str:
        """Where the table's files are, as its catalog says."""
        rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {self.name}").collect()
        found = [r.data_type for r in rows if r.col_name == "Location"]
        if not found:
            raise StreamsError(f"sink topic {self.topic!r}, table {self.name!r}: the catalog "
                               f"gives no location for it")
        return str(found[0])

    def _remove_leftover(self) -> None:
        """Remove the ``_temporary`` folder a killed append left in the table's location."""
        leftover = f"{self.location().rstrip('/')}/_temporary"
        local = _local(leftover)
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)
            return
        fs, path = _hadoop(self.spark, leftover)
        fs.delete(path, True)

    def frame(self) -> Any:
        """The table as a DataFrame."""
        self.spark.catalog.refreshTable(self.name)
        return self.spark.table(self.name)


class ForeachBatchSink(SparkSink):
    """Calls ``fn(df, batch_id)`` with each non-empty micro-batch's typed records."""

    def __init__(self, fn: Callable[[Any, int], Any], typed: bool = True,
                 key_schema: Any = None, value_schema: Any = None) -> None:
        if not callable(fn):
            raise TypeError(f"foreach_batch needs a function fn(df, batch_id), got {fn!r}")
        super().__init__(typed, key_schema, value_schema)
        self.fn = fn

    def __repr__(self) -> str:
        return f"ForeachBatchSink({getattr(self.fn, '__name__', self.fn)!r})"

    def _deliver(self, frame: Any, batch_id: int, state: dict[str, Any]) -> None:
        self.fn(frame, batch_id)


def table(name: str, path: str | None = None, *, format: str = "parquet", typed: bool = True,
          key_schema: Any = None, value_schema: Any = None) -> TableSink:
    """A sink topic written to table ``name`` of the app's Spark catalog; see
    :class:`TableSink`."""
    return TableSink(name, path, format, typed, key_schema, value_schema)


def foreach_batch(fn: Callable[[Any, int], Any], *, typed: bool = True, key_schema: Any = None,
                  value_schema: Any = None) -> ForeachBatchSink:
    """A sink topic whose micro-batches go to ``fn(df, batch_id)``; see
    :class:`ForeachBatchSink`."""
    return ForeachBatchSink(fn, typed, key_schema, value_schema)
