"""Benchmark: how fast a Kafka topic is read by kspark's Python source ``kspark_kafka`` and by
Spark's Kafka connector (``format("kafka")``), in one run on the same topic.

N generated clicks of the sessions example (1 M by default, 10 k users) are produced to a
4-partition topic on the embedded broker first. Then each source reads the whole topic as a
streaming query, the way a ``StreamsApp`` reads a source topic (``KafkaTopic.read_stream`` with
``source="kspark"`` or ``source="spark"``: read committed, kspark's input layout) into a sink that
does nothing (``format("noop")``), with ``trigger(availableNow=True)`` and a fresh checkpoint.
Records/s = N / (time from the query's start to its end, planning included); the time of the
micro-batches themselves (``triggerExecution``) is printed beside it. Both sources are warmed
up first on a small topic; the runs alternate between them (the order swaps every round).
Each run prints the CPU steal of the machine while it ran (``/proc/stat``): a ratio measured
under much steal says little.

    .venv/bin/python benchmarks/kafka_read_rate.py --records 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from kafka_job import PARTITIONS, make_producer
from machine import Steal

from kspark import io
from kspark.examples.sessions import generate_clicks
from kspark.hashing import kafka_partition
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics
from kspark.spark.internals.kafka_connector import has_connector
from kspark.spark.session import local_spark

SOURCES = {"kspark": "kspark's kspark_kafka", "spark": "Spark's connector"}


def produce(bootstrap: str, topic: str, n: int, users: int) -> None:
    ensure_topics(bootstrap, [TopicSpec(topic, PARTITIONS)])
    producer = make_producer(bootstrap)
    started = time.time()
    base = 1_700_000_000_000
    for user, click, ts in generate_clicks(n, users=users):
        key = user.encode()
        while True:
            try:
                producer.produce(topic, json.dumps(click).encode(), key, timestamp=base + ts,
                                 partition=kafka_partition(key, PARTITIONS))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    elapsed = time.time() - started
    print(f"produced {n:,} clicks to {topic!r} ({PARTITIONS} partitions) in {elapsed:.1f} s")


def read_all(spark: Any, bootstrap: str, topic: str, source: str, workdir: str) -> dict:
    """One streaming query reading everything in ``topic`` with ``source``, into no sink."""
    checkpoint = tempfile.mkdtemp(prefix=f"ck-{source}-", dir=workdir)
    steal = Steal()
    started = time.time()
    frame = io.kafka(bootstrap, topic, source=source).read_stream(spark, topic)
    query = (frame.writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    elapsed = time.time() - started
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    shutil.rmtree(checkpoint, ignore_errors=True)
    return {
        "elapsed": elapsed,
        "rows": sum(p["numInputRows"] for p in progress),
        "batches_s": sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000,
        "steal": steal.fraction(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=20_000, help="records of the warm-up")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = local_spark(args.master)
    if not has_connector(spark):
        raise SystemExit("this session has no Spark Kafka connector (see the log): nothing to "
                         "compare")
    workdir = tempfile.mkdtemp(prefix="kspark-bench-kafka-read-")
    try:
        # the clicks' timestamps are of 2023: no retention, else the broker deletes them
        with EmbeddedBroker(log_path=os.path.join(workdir, "broker.log"),
                            config={"log.retention.ms": "-1"}) as broker:
            bootstrap = broker.bootstrap_servers
            produce(bootstrap, "warmup", args.warmup, args.users)
            produce(bootstrap, "clicks", args.records, args.users)
            for source in SOURCES:
                read_all(spark, bootstrap, "warmup", source, workdir)
            rates: dict[str, list[float]] = {s: [] for s in SOURCES}
            for round_ in range(args.repeat):
                order = list(SOURCES) if round_ % 2 == 0 else list(SOURCES)[::-1]
                for source in order:
                    r = read_all(spark, bootstrap, "clicks", source, workdir)
                    assert r["rows"] == args.records, f"{source} read {r['rows']:,} rows"
                    rate = args.records / r["elapsed"]
                    rates[source].append(rate)
                    print(f"run {round_ + 1} {SOURCES[source]:>22}: {rate:>9,.0f} records/s "
                          f"({r['elapsed']:.1f} s, micro-batches {r['batches_s']:.1f} s); "
                          f"{Steal.text(r['steal'])}", flush=True)
                print(f"run {round_ + 1} ratio connector / kspark_kafka: "
                      f"{rates['spark'][-1] / rates['kspark'][-1]:.2f}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    med = {s: statistics.median(r) for s, r in rates.items()}
    print(f"median records/s: kspark_kafka {med['kspark']:,.0f}, connector {med['spark']:,.0f}; "
          f"ratio {med['spark'] / med['kspark']:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
