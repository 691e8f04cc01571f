"""Any streaming DataFrame as a source (``io.frame``): a Parquet table stream and Spark's rate
source run a session count / a count equal to the test driver's on the same records; struct
rows reach the topology as dicts; a row whose key or timestamp column cannot make a record stops
the app naming the column and the row, or with ``log_and_continue`` is skipped and counted."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kspark import StreamsBuilder, io, serdes
from kspark.errors import KsparkError
from kspark.examples.sessions import generate_clicks, topology
from kspark.hashing import kafka_partition
from kspark.spark import StreamsApp
from kspark.testing import TopologyTestDriver

pytestmark = pytest.mark.spark
WINDOWED = serdes.SessionWindowed(serdes.String())
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BASE_MS = int(BASE.timestamp() * 1000)


def _parquet_stream(spark, path: str, clicks: list, files: int):
    os.makedirs(path)
    per = -(-len(clicks) // files)
    for n in range(files):
        part = clicks[n * per:(n + 1) * per]
        pq.write_table(pa.table({
            "user": [u for u, _, _ in part], "page": [c["page"] for _, c, _ in part],
            "ts": pa.array([BASE + dt.timedelta(milliseconds=t) for _, _, t in part],
                           pa.timestamp("us", tz="UTC"))}), os.path.join(path, f"{n:03d}.parquet"))
        # Spark's file stream takes files in modification-time order; files written within one
        # tick of the file system's clock would tie and come in directory order
        os.utime(os.path.join(path, f"{n:03d}.parquet"), (1_700_000_000 + n, 1_700_000_000 + n))
    schema = spark.read.parquet(path).schema
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)


def _run(spark, app_dir, topo, topics, name, config=None, stop_after: float | None = None):
    app = StreamsApp(topo, name, topics, spark=spark, config=config,
                     checkpoint_dir=os.path.join(app_dir, name))
    app.start()
    try:
        if stop_after is None:
            app.process_all_available()
        else:
            app.await_termination(stop_after)
    finally:
        app.stop()
    return app


def test_a_parquet_table_stream_runs_the_session_count_of_the_test_driver(spark, app_dir):
    clicks = list(generate_clicks(600, users=15, seed=8))
    frame = _parquet_stream(spark, os.path.join(app_dir, "clicks"), clicks, 3)
    counts = io.memory(WINDOWED, serdes.Long())
    topics = {"clicks": io.frame(frame, key="user", timestamp="ts", partitions=2),
              "session-counts": counts, "session-pages": io.memory(WINDOWED, serdes.Json())}
    _run(spark, app_dir, topology(), topics, "frame-parquet")
    expected = []
    for part in (0, 1):  # a driver per task, the records of its partition in arrival order
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in clicks:
                if kafka_partition(user.encode(), 2) == part:
                    row = {"user": user, "page": click["page"],
                           "ts": str(BASE + dt.timedelta(milliseconds=ts))}
                    pipe.pipe_input(user, row, BASE_MS + ts)
            out = driver.create_output_topic("session-counts", WINDOWED, serdes.Long())
            expected += [(r.key, r.value) for r in out.read_records_to_list()]
    got = [(k, v) for k, v, _ in counts.records()]
    assert len(expected) > 50
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_the_rate_source_counts_as_the_test_driver_does(spark, app_dir):
    from pyspark.sql import functions as F

    rate = (spark.readStream.format("rate").option("rowsPerSecond", 300).load()
            .withColumn("user", F.concat(F.lit("u"), (F.col("value") % 7).cast("string"))))
    b = StreamsBuilder()
    stream = b.stream("ticks", serdes.String(), serdes.Json())
    stream.to("echo", serdes.String(), serdes.Json())
    stream.group_by_key().count().to_stream().to("counts", serdes.String(), serdes.Long())
    echo, counts = io.memory(serdes.String(), serdes.Json()), io.memory(serdes.String(),
                                                                       serdes.Long())
    topics = {"ticks": io.frame(rate, key="user", value="value", timestamp="timestamp",
                                order_by="value", partitions=2), "echo": echo, "counts": counts}
    _run(spark, app_dir, b.build(), topics, "frame-rate", stop_after=6)
    seen = echo.records()
    assert len(seen) > 100 and all(isinstance(v, int) for _, v, _ in seen)
    final: dict[str, int] = {}
    for key, count, _ in counts.records():
        final[key] = count
    assert final == {u: sum(1 for k, _, _ in seen if k == u) for u in {k for k, _, _ in seen}}
    by_user: dict[str, list[int]] = {}
    for key, value, _ in seen:  # each task's records in the order of the value column
        by_user.setdefault(key, []).append(value)
    assert all(values == sorted(values) for values in by_user.values())


def test_a_row_whose_timestamp_cannot_make_a_record_names_column_and_row(spark, app_dir):
    from pyspark.sql import functions as F

    clicks = list(generate_clicks(40, users=3, seed=2))
    frame = _parquet_stream(spark, os.path.join(app_dir, "bad"), clicks, 1).withColumn(
        "ts", F.when(F.col("page") == clicks[5][1]["page"], F.lit(None)).otherwise(F.col("ts")))
    topo = StreamsBuilder()
    topo.stream("clicks", serdes.String(), serdes.Json()).to("out", serdes.String(),
                                                             serdes.Json())
    with pytest.raises(KsparkError) as caught:
        _run(spark, app_dir, topo.build(),
             {"clicks": io.frame(frame, key="user", timestamp="ts"),
              "out": io.memory(serdes.String(), serdes.Json())}, "frame-bad")
    first = str(caught.value).splitlines()[0]
    assert "io.frame topic 'clicks', row " in first and "timestamp column 'ts'" in first
    assert "of micro-batch 0" in first  # the row's batch
    out = io.memory(serdes.String(), serdes.Json())
    app = _run(spark, app_dir, topo.build(),
               {"clicks": io.frame(frame, key="user", timestamp="ts"), "out": out},
               "frame-skip", config={"default.deserialization.exception.handler":
                                     "log_and_continue"})
    skipped = app.metrics()["dropped-records-invalid-timestamp"]
    assert skipped >= 1 and len(out.records()) + skipped == len(clicks)
