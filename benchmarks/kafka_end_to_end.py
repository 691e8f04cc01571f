"""Benchmark: the main job (the sessions app of ``kspark.examples.sessions``) from a Kafka topic
to Kafka topics on the embedded Apache Kafka broker: kspark on local Spark, then Kafka Streams
(Java, ``benchmarks/kafka-streams-anchor/``, the same job) on the same broker and the same clicks,
printed side by side with the machine's CPU steal and load during each engine's run.

- ``throughput``: N generated clicks (1 M by default, 10 k users, 4 partitions) are produced
  once; then each engine reads the topic from its beginning until everything is processed and
  written to its output topics (emit on window close: the main job). Records/s = N / the time
  from the app's start until all its outputs are written and committed:

  - kspark: from ``StreamsApp.start`` (Spark's JVM is up already; query planning counts) to the
    end of ``process_all_available`` (the last micro-batch's Kafka transaction committed);
  - Kafka Streams: from the moment its JVM (launched just before) makes its ``KafkaStreams``
    object (so client creation, the group's rebalance and the creation of its changelog topics
    count) to the moment the offsets its consumer group committed reach the input's end offsets
    (polled every 50 ms): under exactly-once they commit in the same transaction as the outputs
    of everything before them. The JVM's own start (about half a second) is printed apart.

  Then both engines' final sessions are read back (``read_committed``) and compared: the sessions
  (user, start, end) of each, their counts and pages, and the partition of each. kspark emits
  some sessions that Kafka Streams never does (a deviation on purpose, see the README's
  "Deviations from Kafka Streams": Kafka Streams' own TopologyTestDriver leaves out the same
  ones on the same records); those show as "only in kspark's". Kafka Streams writes a
  session-windowed key to the partition of its inner key (its ``WindowedStreamPartitioner``);
  the last figure of each comparison line counts the sessions both engines put in the same
  partition.
  With ``--floor read`` (kspark alone), the kspark run is Spark's floor for the job's query
  instead (``benchmarks/spark_floor.py``): the same query with stages that only read their
  input, so no sessions are written; what kspark takes beyond it is its own work.
- ``latency``: see ``benchmarks/kafka_latency.py``.

Each mode starts a fresh broker and makes its internal topics for consumer groups and
transactions (made on first use) before either engine runs, so that neither pays for them.
Kafka Streams runs with exactly_once_v2 (kspark's Kafka sink is transactional), 2 stream
threads (2 cores), RocksDB stores with changelog topics (its fault tolerance; kspark's state is
in its checkpoint directory), and one internal setting: closed sessions are emitted on every
record that advances the close time (as in kspark and the TopologyTestDriver) rather than at
most once per wall-clock second, without which sessions that close in the last second of the
bounded input would never be emitted.

    .venv/bin/python benchmarks/kafka_end_to_end.py throughput --records 1000000
    .venv/bin/python benchmarks/kafka_end_to_end.py latency --rate 5000 --seconds 60
    .venv/bin/python benchmarks/kafka_end_to_end.py --engines kspark   # kspark alone
    .venv/bin/python benchmarks/kafka_end_to_end.py throughput --engines kspark --floor read
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from kafka_job import (
    CONFIG,
    ENGINES,
    PARTITIONS,
    TOPICS,
    end_offsets,
    kspark_app,
    kstreams_app,
    make_producer,
    send,
    side_by_side,
)
from kafka_latency import latency
from kafka_streams_anchor import (
    COMMIT_INTERVAL_MS,
    jar_path,
    prepare_coordinators,
)
from machine import Steal, load_text
from pure_python import core_mode
from spark_engines import run_app
from spark_floor import FLOORS, install
from spark_stages import UI_CONF, print_stage_summary, stage_ids

from kspark import io
from kspark.examples.sessions import generate_clicks, topology
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics
from kspark.spark import StreamsApp
from kspark.spark.session import local_spark

# -- throughput --------------------------------------------------------------------------------

def throughput(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str) -> None:
    ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
    base = 1_700_000_000_000
    clicks = [(u, c, base + ts) for u, c, ts in generate_clicks(args.records, users=args.users)]
    producer = make_producer(bootstrap)
    started = time.time()
    for user, click, ts in clicks:
        send(producer, user, click, ts)
    producer.flush(300)
    produce_s = time.time() - started
    print(f"produced {len(clicks):,} clicks in {produce_s:.1f} s "
          f"({len(clicks) / produce_s:,.0f} records/s)")
    results: dict[str, dict[str, Any]] = {}
    for engine in args.engines:
        run = _kspark_throughput if engine == "kspark" else _kstreams_throughput
        results[engine] = run(args, bootstrap, spark, workdir, len(clicks))
    outputs = {e: _final_sessions(bootstrap, *TOPICS[e][1:]) for e in args.engines}
    for engine, (counts, _, tombstones) in outputs.items():
        results[engine]["sessions"] = f"{len(counts):,}"
        results[engine]["clicks"] = f"{sum(c for *_, c in counts):,}"
        if tombstones:
            results[engine]["sessions"] += f" (+{tombstones:,} tombstones)"
    print(f"\nthroughput, {len(clicks):,} clicks ({args.users:,} users, {PARTITIONS} "
          f"partitions), topic to topics, emit on window close:")
    side_by_side([
        ("records/s", {e: f"{r['rate']:,.0f}" for e, r in results.items()}),
        ("seconds, start to all written", {e: f"{r['elapsed']:.1f}" for e, r in results.items()}),
        ("records/s in its micro-batches (the query's start left out)",
         {e: f"{r['batch rate']:,.0f}" for e, r in results.items() if "batch rate" in r}),
        ("sessions written", {e: r["sessions"] for e, r in results.items()}),
        ("clicks in the sessions", {e: r["clicks"] for e, r in results.items()}),
        ("late records dropped (x2: both aggregations)",
         {e: f"{r['dropped']:,}" for e, r in results.items()}),
        ("CPU steal", {e: r["steal"] for e, r in results.items()}),
        ("load at the end", {e: r["load"] for e, r in results.items()}),
    ], list(args.engines))
    if len(outputs) == 2 and not _compare(outputs["kspark"], outputs["kstreams"]):
        sys.exit("kspark's and Kafka Streams' sessions differ beyond the README's deviation")


def _kspark_warm_up(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str) -> None:
    """The job run once on clicks of topics of its own, in the same Spark session (so that the
    measured run starts on a warm JVM and warm Python workers, as a job that keeps running
    does)."""
    ensure_topics(bootstrap, [TopicSpec("warm-up-clicks", PARTITIONS)])
    producer = make_producer(bootstrap)
    base = 1_600_000_000_000
    for user, click, ts in generate_clicks(args.warm_up, users=args.users, seed=7):
        send(producer, user, click, base + ts, topic="warm-up-clicks")
    producer.flush(300)
    topics = {"clicks": io.kafka(bootstrap, topic="warm-up-clicks"),
              "session-counts": io.kafka(bootstrap, topic="warm-up-counts"),
              "session-pages": io.kafka(bootstrap, topic="warm-up-pages")}
    app = StreamsApp(topology(emit_on_close=True), "bench-warm-up", topics, spark=spark,
                     checkpoint_dir=os.path.join(workdir, "warm-up-checkpoint"), config=CONFIG)
    started = time.time()
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    print(f"kspark warm-up: {args.warm_up:,} other clicks through the job in "
          f"{time.time() - started:.1f} s (not measured)")


def _kspark_throughput(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str,
                       n: int) -> dict[str, Any]:
    if args.warm_up:
        _kspark_warm_up(args, bootstrap, spark, workdir)
    app = kspark_app(bootstrap, spark, workdir, True, args.per_trigger)
    steal = Steal()
    elapsed, progress, metrics = run_app(app)
    progress = [p for p in progress if p["numInputRows"]]
    batches_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    result = {"rate": n / elapsed, "elapsed": elapsed, "dropped": metrics["dropped-records-total"],
              "steal": Steal.text(steal.fraction()), "load": load_text(),
              "batch rate": n / batches_s if batches_s else 0.0}
    print(f"{ENGINES['kspark']}: {n:,} records in {elapsed:.1f} s = {n / elapsed:,.0f} records/s "
          f"on {args.master} ({len(progress)} micro-batches; {result['steal']}, {result['load']})")
    for p in progress:
        d = p["durationMs"]
        print(f"  batch {p['batchId']}: {p['numInputRows']:,} rows, "
              f"{d.get('triggerExecution', 0) / 1000:.1f} s (addBatch "
              f"{d.get('addBatch', 0) / 1000:.1f} s, latestOffset "
              f"{d.get('latestOffset', 0) / 1000:.2f} s)")
    return result


def _kstreams_throughput(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str,
                         n: int) -> dict[str, Any]:
    ends = end_offsets(bootstrap, "clicks")
    app = kstreams_app(args, bootstrap, workdir, "kstreams-throughput", "clicks", True)
    steal = Steal()
    app.start()
    try:
        done = app.wait_caught_up(ends, timeout=args.drain)
        fraction = steal.fraction()
        load = load_text()
    finally:
        app.stop()
    elapsed = done - app.created_at
    assert app.launched_at is not None
    running = app.reported.get("running")
    result = {"rate": n / elapsed, "elapsed": elapsed, "dropped": app.dropped or 0,
              "steal": Steal.text(fraction), "load": load}
    print(f"Kafka Streams: {n:,} records in {elapsed:.1f} s = {n / elapsed:,.0f} records/s "
          f"({args.ks_threads} stream threads, commit every {args.ks_commit_ms} ms; the JVM took "
          f"{app.created_at - app.launched_at:.1f} s to start, not counted; RUNNING after "
          + (f"{running - app.created_at:.1f} s" if running else "?")
          + f"; {result['steal']}, {load})")
    return result


Sessions = tuple[Counter, Counter, int]


def _final_sessions(bootstrap: str, counts_topic: str, pages_topic: str) -> Sessions:
    """The sessions of an engine's output topics, read_committed: ``(counts, pages,
    tombstones)``, counters of ``(partition, user, start, end, count)`` and of ``(partition,
    user, start, end, pages)``."""
    from kspark.kafka.reader import read_to_end, wait_settled
    from kspark.serdes import SessionWindowed, String

    wait_settled(bootstrap, [counts_topic, pages_topic])
    keys = SessionWindowed(String())
    counts: Counter = Counter()
    pages: Counter = Counter()
    tombstones = 0
    for topic, into in ((counts_topic, counts), (pages_topic, pages)):
        for m in read_to_end(bootstrap, topic):
            if m.value() is None:
                tombstones += 1
                continue
            w = keys.deserialize(m.key())
            value = (struct.unpack(">q", m.value())[0] if into is counts
                     else tuple(json.loads(m.value())))
            into[(m.partition(), w.key, w.window.start, w.window.end, value)] += 1
    return counts, pages, tombstones


def _compare(ours: Sessions, theirs: Sessions) -> bool:
    """Print whether kspark's and Kafka Streams' final sessions agree: the same sessions (user,
    start, end) with the same count and pages, and each in the same partition. False when they
    differ beyond the README's deviation (sessions only kspark emits): a session only Kafka
    Streams emits, a different count or pages, or a session written twice."""
    within = True
    for what, a, b in (("session counts", ours[0], theirs[0]),
                       ("session pages", ours[1], theirs[1])):
        mine = {k[1:4]: (k[0], k[4]) for k in a}
        other = {k[1:4]: (k[0], k[4]) for k in b}
        both = mine.keys() & other.keys()
        same_value = sum(1 for k in both if mine[k][1] == other[k][1])
        same_partition = sum(1 for k in both if mine[k][0] == other[k][0])
        only_mine = sorted(mine.keys() - other.keys())
        only_other = sorted(other.keys() - mine.keys())
        duplicates = sum(a.values()) - len(mine) + sum(b.values()) - len(other)
        agree = not only_mine and not only_other and same_value == len(both) and not duplicates
        within = within and not only_other and same_value == len(both) and not duplicates
        print(f"{what}: {'AGREE' if agree else 'DIFFER'}: {len(both):,} sessions (user, start, "
              f"end) in both outputs, {same_value:,} of them with the same "
              f"{'count' if what == 'session counts' else 'pages'}; {len(only_mine):,} only in "
              f"kspark's, {len(only_other):,} only in Kafka Streams'"
              + (f"; {duplicates:,} written twice" if duplicates else "")
              + f"; {same_partition:,} of those in both in the same partition")
        for label, only, source in (("kspark only", only_mine, mine),
                                    ("Kafka Streams only", only_other, other)):
            for key in only[:3]:
                print(f"  {label}: {key[0]} [{key[1]}, {key[2]}] -> {source[key][1]}")
        for key in [k for k in sorted(both) if mine[k][1] != other[k][1]][:3]:
            print(f"  different: {key[0]} [{key[1]}, {key[2]}]: kspark {mine[key][1]}, "
                  f"Kafka Streams {other[key][1]}")
    return within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["throughput", "latency", "both"], nargs="?",
                        default="both")
    parser.add_argument("--engines", default="kspark,kstreams",
                        help="comma-separated, run in this order: kspark, kstreams (Kafka "
                             "Streams); default both")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--per-trigger", type=int, default=None,
                        help="kspark: max records per micro-batch (throughput; default: all)")
    parser.add_argument("--warm-up", type=int, default=0,
                        help="kspark throughput: first run the job once on this many other "
                             "clicks (topics of their own) in the same Spark session, so that "
                             "the measured run starts warm; default 0, a cold start")
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10,
                        help="seconds of steady input left out of the latency figures")
    parser.add_argument("--drain", type=float, default=600.0,
                        help="at most this long to process what is left after the input")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--ks-commit-ms", type=int, default=COMMIT_INTERVAL_MS,
                        help="Kafka Streams' commit.interval.ms (default: its own default "
                             "under exactly-once, 100)")
    parser.add_argument("--ks-threads", type=int, default=2,
                        help="Kafka Streams' num.stream.threads")
    parser.add_argument("--conf", action="append", default=[], help="extra kspark config k=v")
    parser.add_argument("--stages", action="store_true",
                        help="kspark: also print where each run's Spark time goes, stage by "
                             "stage (turns Spark's UI on for its REST API)")
    parser.add_argument("--floor", choices=FLOORS,
                        help="throughput, kspark alone: instead of the job, Spark's floor for "
                             "its query (benchmarks/spark_floor.py): its stages only read their "
                             "input (read) or not even that (empty)")
    parser.add_argument("--ks-cache-bytes", type=int, default=None,
                        help="Kafka Streams' statestore.cache.max.bytes (default: its default)")
    args = parser.parse_args()
    print(core_mode())
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    CONFIG.update(kv.split("=", 1) for kv in args.conf)
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown or not args.engines:
        parser.error(f"--engines: choose from {', '.join(ENGINES)}")
    if args.floor:
        if args.engines != ["kspark"] or args.mode != "throughput":
            parser.error("--floor: mode throughput with --engines kspark")
        install(args.floor)
        ENGINES["kspark"] = f"floor ({args.floor})"
    if "kstreams" in args.engines:
        jar_path()  # built before anything is measured
    spark = (local_spark(args.master, UI_CONF if args.stages else None)
             if "kspark" in args.engines else None)
    for mode in (["throughput", "latency"] if args.mode == "both" else [args.mode]):
        workdir = tempfile.mkdtemp(prefix="kspark-bench-kafka-")
        try:
            with EmbeddedBroker(log_path=os.path.join(workdir, "broker.log")) as broker:
                prepare_coordinators(broker.bootstrap_servers)
                before = stage_ids(spark) if args.stages and spark is not None else -1
                (throughput if mode == "throughput" else latency)(
                    args, broker.bootstrap_servers, spark, workdir)
                if args.stages and spark is not None:
                    print_stage_summary(spark, before, f"kspark's {mode} run")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
