"""Benchmark: how long application B takes to restore its read-only view of application A's
window store from A's changelog (docs/semantics.md §7, seed 004).

The changelog is written the way A's Spark sink writes it (``state.changelog.dir``: one file
of kspark records per micro-batch; with ``--source kafka`` a compacted topic of the embedded
Apache Kafka broker, as A's Kafka sink writes it), for seed 004's store: event counts per
"user|type" in 24-hour windows kept 30 days. B is a topology with only the read-only store; the
time runs from ``StreamsApp.start`` until every changelog record has been processed and
committed. ``--warm-up N`` first restores another view in the same Spark session. With
``--source kafka --kafka-streams``, Kafka Streams 4.3.1 then restores the same store from the
same topic (``kspark.anchor.RestoreWindowStore`` of ``benchmarks/kafka-streams-anchor/``: an
application whose logged RocksDB window store has that topic as its changelog, started on an
empty state directory), side by side.

    .venv/bin/python benchmarks/restore_changelog.py --records 1000000
    .venv/bin/python benchmarks/restore_changelog.py --source kafka --warm-up 100000
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from kafka_streams_anchor import run_main
from machine import Steal, load_text
from pure_python import core_mode
from spark_stages import UI_CONF, print_stage_summary

DAY = 86_400_000


def changelog_records(records: int, partitions: int, seed: int
                      ) -> Iterator[tuple[bytes, bytes, int, int]]:
    """``records`` changelog records ``(key, value, timestamp, partition)`` of a count store,
    day by day."""
    from kspark.hashing import kafka_partition
    from kspark.serdes import String
    from kspark.state.internals.changelog import ChangelogCodec
    from kspark.windows import Window, Windowed

    codec = ChangelogCodec("window", String(), None, DAY)
    key_serde = String()
    rng = random.Random(seed)
    users, types, days = 20_000, 20, 40
    per_day = records // days
    counts: dict[tuple[str, int], int] = {}
    for i in range(records):
        day = min(i // per_day, days - 1)
        key = f"user-{rng.randrange(users):05d}|type-{rng.randrange(types):02d}"
        start = day * DAY
        count = counts[(key, start)] = counts.get((key, start), 0) + 1
        ts = start + rng.randrange(DAY)
        part = kafka_partition(key_serde.serialize(key), partitions)
        yield (codec.encode_key(Windowed(key, Window(start, start + DAY))),
               codec.encode_value(count), ts, part)


def write_changelog(path: str, records: int, files: int, partitions: int, seed: int) -> None:
    """The changelog records in ``files`` files, as A's file sink writes them."""
    from kspark.io import files as file_topic

    topic = file_topic(path, format="kspark")
    batch: list[tuple[bytes, bytes | None, int, int]] = []
    per_file = -(-records // files)
    written = 0
    for record in changelog_records(records, partitions, seed):
        batch.append(record)
        if len(batch) == per_file:
            topic.write_batch(written, batch)
            written += 1
            batch = []
    if batch:
        topic.write_batch(written, batch)


def produce_changelog(bootstrap: str, topic: str, records: int, partitions: int,
                      seed: int) -> None:
    """The changelog records in a Kafka topic of ``partitions`` partitions, as A's Kafka sink
    writes them."""
    from confluent_kafka import Producer

    from kspark.kafka import TopicSpec, ensure_topics

    # a compacted changelog, its records kept whatever their (1970s) timestamps
    ensure_topics(bootstrap, [TopicSpec(topic, partitions, {"cleanup.policy": "compact"})])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 4,
                         "queue.buffering.max.messages": 1_000_000})
    for key, value, ts, part in changelog_records(records, partitions, seed):
        while True:
            try:
                producer.produce(topic, value, key, partition=part, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)


def restore_in_process(topology: Any, path: str, topic: str, partitions: int) -> float:
    """Seconds to run the same restore through the task code without Spark (files read and
    decoded, one batch of columns per partition as the Spark stage gives it, buckets pickled as
    the Spark stage would)."""
    import numpy as np

    from kspark.config import StreamsConfig
    from kspark.io.files import file_rows, list_data_files
    from kspark.runtime.batch import DictTaskState, run_task_batch
    from kspark.runtime.serialized import SourceBatch

    t0 = time.time()
    columns: dict[int, list[list[Any]]] = {p: [[], [], [], []] for p in range(partitions)}
    for index, name in enumerate(list_data_files(path)):
        keys, values, stamps, parts = file_rows(
            os.path.join(path, name), "kspark", "key", None, "timestamp", partitions
        )
        for line, (k, v, ts, p) in enumerate(zip(keys, values, stamps, parts)):
            for column, item in zip(columns[p], (k, v, ts, (index << 32) + line)):
                column.append(item)
    sub = topology.sub_topologies()[0]
    for p, (keys, values, stamps, offsets) in columns.items():
        batch = SourceBatch(np.array(stamps), np.full(len(stamps), p), np.array(offsets),
                            np.array(keys, dtype=object), np.array(values, dtype=object), topic)
        run_task_batch(topology, sub, p, batch, DictTaskState(), StreamsConfig.of(None))
    return time.time() - t0


def kafka_streams_restore(bootstrap: str, partitions: int, workdir: str) -> dict[str, float]:
    """Kafka Streams restoring the store ``event-counts`` of application ``event-counter`` from
    its changelog topic, with two stream threads: records restored, seconds from ``start()``
    to RUNNING, seconds of the restores themselves, windows in the store after."""
    from kspark.kafka import TopicSpec, ensure_topics

    ensure_topics(bootstrap, [TopicSpec("event-counter-events", partitions)])
    for line in run_main("RestoreWindowStore", bootstrap, "event-counter", "event-counts",
                         "event-counter-events", os.path.join(workdir, "kafka-streams-state"),
                         str(30 * DAY), str(DAY), "2"):
        what, *fields = line.split()
        if what == "restored":
            records, to_running, restoring, windows = fields
            return {"records": int(records), "to_running": float(to_running),
                    "restoring": float(restoring), "windows": int(windows)}
    raise RuntimeError("Kafka Streams' restore printed no result")


def _restore(args: argparse.Namespace, spark: Any, location: Any, topic: str, app_id: str,
             checkpoint: str) -> float:
    """Seconds from B's start until its view has every changelog record of ``location``."""
    from kspark import Stores, Topology
    from kspark.serdes import String
    from kspark.spark import StreamsApp

    topology = Topology()
    topology.add_read_only_state_store(
        Stores.window_store("event-counts", 30 * DAY, DAY, key_serde=String()), topic
    )
    app = StreamsApp(topology, app_id, {topic: location}, spark=spark,
                     config=dict(item.split("=", 1) for item in args.conf),
                     checkpoint_dir=checkpoint)
    t0 = time.time()
    app.start()
    app.process_all_available()
    restore_s = time.time() - t0
    if os.environ.get("KSPARK_BENCH_PROGRESS"):
        for progress in app.query.recentProgress:
            print(progress["batchId"], progress["numInputRows"], progress["durationMs"])
    app.stop()
    t0 = time.time()
    windows = len(app.store("event-counts").all())
    print(f"view: {windows:,} live windows; reading the whole view took {time.time() - t0:.1f} s")
    return restore_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--source", choices=["files", "kafka"], default="files",
                        help="where A's changelog is: files of its file sink (default), or a "
                             "topic of the embedded Apache Kafka broker")
    parser.add_argument("--warm-up", type=int, default=0,
                        help="first restore another view from this many other changelog "
                             "records in the same Spark session (a warm JVM and Python "
                             "workers, as an application started on a running cluster finds "
                             "them); default 0, a cold start")
    parser.add_argument("--max-files-per-trigger", type=int, default=0,
                        help="0: restore in one micro-batch")
    parser.add_argument("--conf", action="append", default=[], help="kspark config k=v")
    parser.add_argument("--stages", action="store_true",
                        help="print where the Spark job's time goes, stage by stage")
    parser.add_argument("--in-process", action="store_true",
                        help="also time the task code alone, without Spark")
    parser.add_argument("--kafka-streams", action="store_true",
                        help="with --source kafka: Kafka Streams restores the same store too")
    args = parser.parse_args()
    print(core_mode())
    if args.kafka_streams and args.source != "kafka":
        parser.error("--kafka-streams needs --source kafka")

    from kspark import Stores, Topology, io
    from kspark.kafka import EmbeddedBroker
    from kspark.serdes import String
    from kspark.spark.session import local_spark
    from kspark.state.internals.changelog import changelog_topic

    root = tempfile.mkdtemp(prefix="kspark-restore-bench-")
    broker = EmbeddedBroker().start() if args.source == "kafka" else None
    try:
        topic = changelog_topic("event-counter", "event-counts")
        path = os.path.join(root, topic)

        def location(name: str, records: int, seed: int) -> Any:
            if broker is not None:
                produce_changelog(broker.bootstrap_servers, name, records, args.partitions, seed)
                return io.kafka(broker.bootstrap_servers, topic=name)
            write_changelog(os.path.join(root, name), records, args.files, args.partitions, seed)
            return io.files(os.path.join(root, name), format="kspark",
                            partitions=args.partitions,
                            max_files_per_trigger=args.max_files_per_trigger or None)

        t0 = time.time()
        source = location(topic, args.records, 1)
        print(f"wrote {args.records:,} changelog records to {args.source} in "
              f"{time.time() - t0:.1f} s")
        spark = local_spark("local[2]", UI_CONF if args.stages else None)
        if args.warm_up:
            other = location("warm-up-changelog", args.warm_up, 2)
            seconds = _restore(args, spark, other, topic, "warm-up-reader",
                               os.path.join(root, "warm-up"))
            print(f"warm-up: another view restored from {args.warm_up:,} records in "
                  f"{seconds:.1f} s (not measured)")
        steal = Steal()
        restore_s = _restore(args, spark, source, topic, "event-reader", os.path.join(root, "b"))
        print(f"restored {args.records:,} changelog records from {args.source} in "
              f"{restore_s:.1f} s ({args.records / restore_s:,.0f} records/s), "
              f"{args.partitions} partitions; {Steal.text(steal.fraction())}, {load_text()}")
        if args.stages:
            print_stage_summary(spark)
        if broker is not None and args.kafka_streams:
            steal = Steal()
            theirs = kafka_streams_restore(broker.bootstrap_servers, args.partitions, root)
            print(f"Kafka Streams restored {theirs['records']:,} changelog records in "
                  f"{theirs['to_running']:.1f} s from start() to RUNNING "
                  f"({theirs['records'] / theirs['to_running']:,.0f} records/s; the restores "
                  f"themselves {theirs['restoring']:.1f} s), {theirs['windows']:,} windows in "
                  f"its store; kspark {theirs['to_running'] / restore_s:.2f}x; "
                  f"{Steal.text(steal.fraction())}, {load_text()}")
        if args.in_process:
            if broker is not None:
                write_changelog(path, args.records, args.files, args.partitions, seed=1)
            topology = Topology()
            topology.add_read_only_state_store(
                Stores.window_store("event-counts", 30 * DAY, DAY, key_serde=String()), topic
            )
            steal = Steal()
            seconds = restore_in_process(topology, path, topic, args.partitions)
            print(f"the same restore in-process without Spark (task code only): {seconds:.1f} s "
                  f"({args.records / seconds:,.0f} records/s); {Steal.text(steal.fraction())}")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
