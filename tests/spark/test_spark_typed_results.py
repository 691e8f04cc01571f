"""Typed results: file sinks write decoded, typed columns that Spark reads back as such, equal to
the test driver's; ``app.output(topic)`` and ``app.store(name).to_frame()`` give DataFrames; a
schema that cannot take a result names the topic and the column."""

from __future__ import annotations

import json
import os
import re

import pyarrow as pa
import pytest
from typed_util import PARTITIONS, clicks, driver_sessions, driver_store, spark_sessions

from kspark import Materialized, StreamsBuilder, io, serdes
from kspark.errors import KsparkError
from kspark.examples.sessions import topology
from kspark.io.files import list_data_files
from kspark.spark import StreamsApp

pytestmark = pytest.mark.spark


def _sessions_app(spark, app_dir, records, sinks, app_id):
    source = io.memory(serdes.String(), serdes.Json(), partitions=PARTITIONS,
                       max_files_per_trigger=1)
    source.send_all(records, per_file=100)
    return StreamsApp(topology(), app_id, {"clicks": source, **sinks}, spark=spark,
                      checkpoint_dir=os.path.join(app_dir, app_id))


@pytest.mark.parametrize("counts_format", ["jsonl", "parquet"])
def test_sessions_in_files_read_back_typed_as_the_driver_has_them(spark, app_dir, counts_format):
    records = clicks()
    expected = driver_sessions(records)
    assert len(expected["session-counts"]) > 20
    pages_format = "parquet" if counts_format == "jsonl" else "jsonl"
    paths = {t: os.path.join(app_dir, t) for t in expected}
    app = _sessions_app(spark, app_dir, records, {
        "session-counts": io.files(paths["session-counts"], format=counts_format),
        "session-pages": io.files(paths["session-pages"], format=pages_format),
    }, f"typed-{counts_format}")
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()

    def read(fmt, path):  # Spark's own readers, nothing of kspark
        if fmt == "parquet":
            return spark.read.parquet(path)
        return spark.read.option("inferTimestamp", "true").json(path)

    counts = read(counts_format, paths["session-counts"])
    types = dict(counts.dtypes)
    assert (types["key"], types["window_start"], types["window_end"], types["value"]) == (
        "string", "timestamp", "timestamp", "bigint")
    assert (types["timestamp"], types["is_tombstone"]) == ("timestamp", "boolean")
    assert types["partition"] in ("int", "bigint")
    assert spark_sessions(counts) == expected["session-counts"]
    pages = read(pages_format, paths["session-pages"])
    assert dict(pages.dtypes)["value"] == "string"  # Json without a schema: its JSON text
    assert spark_sessions(pages) == expected["session-pages"]

    # the same through app.output, and the store's contents as a frame
    for topic in expected:
        assert spark_sessions(app.output(topic)) == expected[topic]
    store = app.store("session-counts").to_frame()
    assert dict(store.dtypes)["window_start"] == "timestamp"
    assert store.columns[:2] == ["key", "window_start"] and store.columns[-1] == "value"
    kept = {(r.key, r.window_start_ms, r.window_end_ms): r.value for r in store.collect()}
    assert kept and kept == driver_store(records, "session-counts")


def _table_counts():
    """Counts per user; users with 3 or more clicks are deleted from the output table (its
    update stream carries tombstones)."""
    builder = StreamsBuilder()
    (builder.stream("clicks", serdes.String(), serdes.Json())
        .group_by_key()
        .count(Materialized("counts"))
        .filter(lambda user, n: n < 3)
        .to_stream()
        .to("small", serdes.String(), serdes.Long()))
    return builder.build()


def test_memory_sink_output_has_tombstones_and_a_key_value_store_frame(spark, app_dir):
    source = io.memory(serdes.String(), serdes.Json(), max_files_per_trigger=1)
    source.send_all([(u, {"n": i}, i) for i, u in enumerate("abcabca")], per_file=3)
    out = io.memory()
    app = StreamsApp(_table_counts(), "typed-memory", {"clicks": source, "small": out},
                     spark=spark, checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    frame = app.output("small")
    assert dict(frame.dtypes) == {"key": "string", "value": "bigint", "is_tombstone": "boolean",
                                  "timestamp": "timestamp", "timestamp_ms": "bigint",
                                  "partition": "int"}
    last = {}
    for row in frame.orderBy("timestamp_ms").collect():
        assert row.is_tombstone == (row.value is None)
        last[row.key] = row.value
    assert last == {"a": None, "b": 2, "c": 2}
    store = app.store("counts").to_frame()
    assert dict(store.dtypes) == {"key": "string", "value": "bigint"}
    assert sorted(map(tuple, store.collect())) == [("a", 3), ("b", 2), ("c", 2)]


def _json_passthrough():
    builder = StreamsBuilder()
    builder.stream("in", serdes.String(), serdes.Json()).to("out", serdes.String(), serdes.Json())
    return builder.build()


def test_a_schema_that_cannot_take_a_result_names_topic_and_column(spark, app_dir):
    source = io.memory(serdes.String(), serdes.Json())
    source.send_all([("a", {"page": "/", "ms": 5}, 1)])
    schema = pa.schema([("page", pa.string())])  # no field "ms"
    app = StreamsApp(_json_passthrough(), "typed-bad-schema", {
        "in": source, "out": io.files(os.path.join(app_dir, "out"), format="parquet",
                                      value_schema=schema)},
        spark=spark, checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        with pytest.raises(KsparkError) as caught:
            app.process_all_available()
    finally:
        app.stop()
    first = str(caught.value).splitlines()[0]
    assert first.startswith("sink topic 'out', column 'value.ms': the schema has no field"), first


def test_a_struct_schema_types_json_values(spark, app_dir):
    source = io.memory(serdes.String(), serdes.Json())
    source.send_all([("a", {"page": "/", "ms": 5}, 1), ("b", {"page": "/x"}, 2)])
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("page", StringType()), StructField("ms", LongType())])
    path = os.path.join(app_dir, "out")
    app = StreamsApp(_json_passthrough(), "typed-struct", {
        "in": source, "out": io.files(path, value_schema=schema)},
        spark=spark, checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    frame = app.output("out")
    assert dict(frame.dtypes)["value"] == "struct<page:string,ms:bigint>"
    assert sorted((r.key, r.value.page, r.value.ms) for r in frame.collect()) == [
        ("a", "/", 5), ("b", "/x", None)]
    # one file per Spark partition of the batch that had records, published by the driver
    files = list_data_files(path)
    assert files and all(re.fullmatch(r"batch-000000000000-\d{5}\.jsonl", n) for n in files)
    assert not os.listdir(os.path.join(path, "_staging"))
    lines = []
    for name in files:
        with open(os.path.join(path, name)) as f:
            lines += [json.loads(line) for line in f]
    assert {"page": "/", "ms": 5} in [row["value"] for row in lines]


def test_a_table_whose_schema_conflicts_stops_start_naming_topic_and_column(spark, app_dir):
    name = "typed_conflict"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (key STRING, value STRING) USING parquet "
              f"LOCATION '{os.path.join(app_dir, 'table')}'")
    from kspark.spark import table

    source = io.memory(serdes.String(), serdes.Json())
    app = StreamsApp(_table_counts(), "typed-table-conflict", {"clicks": source,
                                                                "small": table(name)},
                     spark=spark, checkpoint_dir=os.path.join(app_dir, "ck"))
    try:
        with pytest.raises(KsparkError) as caught:
            app.start()
    finally:
        app.stop()
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    assert str(caught.value) == (f"sink topic 'small', table '{name}', column 'value': the "
                                 "table has string, the results are bigint")
