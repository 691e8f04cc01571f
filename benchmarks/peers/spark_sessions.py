"""The sessions job on Spark's own operators, from a Kafka topic to Kafka topics through Spark's
Kafka connector, in a process of its own for ``benchmarks/peers.py``: ``session_window`` (gap
10 s) grouped by user with a watermark of 10 s (the grace) on the record timestamp, the count
and the pages in arrival order (a user's clicks are in one partition: its offsets), as the
example's aggregator appends them, append mode (each session once, when the watermark passes its
end), ``Trigger.AvailableNow``. Spark's Kafka sink writes at least once (it has no transactions).

Tuned as Spark's guide suggests for this shape: the in-memory state store (HDFS-backed: faster
than RocksDB while the state fits in memory) unless ``--rocksdb``, sessions merged within each
partition before the shuffle (``spark.sql.streaming.sessionWindow.merge.sessions.in.local.
partition``), 4 shuffle partitions (the input's), the JVM's default JIT.

    .venv/bin/python benchmarks/peers/spark_sessions.py --bootstrap HOST:PORT --input clicks \\
        --counts spark-session-counts --pages spark-session-pages [--warm-up-input TOPIC]

``--live`` (``benchmarks/peers_latency.py``): the same query, append mode (Spark 4 refuses update
mode for session windows: ``STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION``), so a session is still
written once, when the watermark passes its end; micro-batches back to back (Spark's default
trigger; a batch without data runs when the watermark moves), until SIGTERM; at least once.
With ``--job counts``: a running count of each user's clicks, update mode, JSON ``{"user",
"count"}``.

Output values are JSON ``{"user", "start", "end", "count" | "pages"}`` with Kafka Streams'
session bounds (the first and the last click's timestamps: Spark's end is the last + the gap).
"""

from __future__ import annotations

import os
import tempfile

import protocol
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kspark.spark.internals.kafka_connector import connector_jars

GAP = "10 seconds"
GAP_MS = 10_000
GRACE = "10 seconds"


def session(master: str, rocksdb: bool, extra: dict[str, str]) -> SparkSession:
    conf = {
        "spark.master": master,
        "spark.jars": ",".join(connector_jars() or []),
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.streaming.sessionWindow.merge.sessions.in.local.partition": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
    }
    conf.update(extra)
    if rocksdb:
        conf["spark.sql.streaming.stateStore.providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    builder = SparkSession.builder.appName("peers-spark")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    shown = {k: v for k, v in conf.items() if k != "spark.jars"}
    print(f"config: Spark native, {shown}, state store "
          f"{'RocksDB' if rocksdb else 'HDFS-backed (in memory)'}", flush=True)
    return spark


def run(spark: SparkSession, bootstrap: str, source: str, counts: str, pages: str,
        checkpoint: str, live: bool = False) -> None:
    clicks = (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").load()
        .select(F.col("key").cast("string").alias("user"), F.col("timestamp").alias("t"),
                F.get_json_object(F.col("value").cast("string"), "$.page").alias("page"),
                "offset")
        .withWatermark("t", GRACE)
        .groupBy("user", F.session_window("t", GAP))
        .agg(F.count("*").alias("count"),
             F.array_sort(F.collect_list(F.struct("offset", "page"))).alias("clicks"))
    )
    start = F.unix_millis(F.col("session_window.start")).alias("start")
    end = (F.unix_millis(F.col("session_window.end")) - GAP_MS).alias("end")
    count = F.to_json(F.struct("user", start, end, F.col("count")))
    pages_of = F.to_json(F.struct("user", start, end,
                                  F.transform("clicks", lambda c: c["page"]).alias("pages")))
    out = clicks.select(F.col("user").alias("key"), F.explode(F.array(
        F.struct(F.lit(counts).alias("topic"), count.alias("value")),
        F.struct(F.lit(pages).alias("topic"), pages_of.alias("value")))).alias("row")
    ).select("key", "row.topic", "row.value")  # one query, a row for each output topic
    writer = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("checkpointLocation", checkpoint))
    writer = writer.outputMode("append")
    if not live:
        writer.trigger(availableNow=True).start().awaitTermination()
        return
    query = writer.start()
    protocol.live()
    try:
        protocol.until_stopped()
    finally:
        query.stop()


def live_counts(spark: SparkSession, bootstrap: str, source: str, counts: str,
                checkpoint: str) -> None:
    """A running count of each user's clicks, update mode (each micro-batch writes the users it
    changed), JSON ``{"user", "count"}``, until SIGTERM."""
    out = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", source).option("startingOffsets", "earliest").load()
           .select(F.col("key").cast("string").alias("user")).groupBy("user").count()
           .select(F.col("user").alias("key"), F.to_json(F.struct("user", "count")).alias("value")))
    query = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", counts).option("checkpointLocation", checkpoint)
             .outputMode("update").start())
    protocol.live()
    try:
        protocol.until_stopped()
    finally:
        query.stop()


def main() -> None:
    options = protocol.parser()
    options.add_argument("--master", default="local[2]")
    options.add_argument("--rocksdb", action="store_true")
    options.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                         help="a Spark setting over the script's")
    args = options.parse_args()
    spark = session(args.master, args.rocksdb,
                    dict(setting.split("=", 1) for setting in args.conf))
    work = tempfile.mkdtemp(prefix="peers-spark-")
    if args.live and args.job == "counts":
        print("config: a running count per user, update output mode, micro-batches back to "
              "back (default trigger)", flush=True)
        live_counts(spark, args.bootstrap, args.input, args.counts, os.path.join(work, "live"))
        return
    if args.live:
        print("config: append output mode (sessions written when they close), micro-batches "
              "back to back (default trigger)", flush=True)
        run(spark, args.bootstrap, args.input, args.counts, args.pages,
            os.path.join(work, "live"), live=True)
        return
    _, elapsed, warm_up_s = protocol.measure(
        args, lambda source, counts, pages, tag: run(
            spark, args.bootstrap, source, counts, pages, os.path.join(work, tag)))
    protocol.result(elapsed=elapsed, warm_up_s=warm_up_s, dropped=None)


if __name__ == "__main__":
    main()
