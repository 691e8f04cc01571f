"""Benchmark: the main job (the sessions app of ``kspark.examples.sessions``) from a Kafka topic
to Kafka topics, on the embedded broker and local Spark.

- ``throughput``: N generated clicks (1 M by default, 10 k users, 4 partitions) are produced
  first; then the app runs from the topic's beginning until everything is processed and written
  to the output topics. Records/s = N / (time from ``StreamsApp.start`` to the end of
  ``process_all_available``, query planning included). Emit on window close (the main job).
- ``latency``: clicks are produced at a steady rate (5 k/s by default) for a bounded time, each
  with the wall-clock time of its production as timestamp; the app emits session updates (emit
  on update, caching per micro-batch). A click's latency is the time from its production until
  the consumer of the output topic receives the first update of its user's session whose end is
  at or after the click's timestamp. The app is warmed up first (1000 clicks processed); the
  first ``--warmup`` seconds of steady input are left out.

    .venv/bin/python benchmarks/kafka_end_to_end.py throughput --records 1000000
    .venv/bin/python benchmarks/kafka_end_to_end.py latency --rate 5000 --seconds 60
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from typing import Any

from machine import Steal, load_text

from kspark import io
from kspark.examples.sessions import PAGES, generate_clicks, topology
from kspark.hashing import kafka_partition
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics
from kspark.spark import StreamsApp
from kspark.spark.session import local_spark

PARTITIONS = 4


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 10, "queue.buffering.max.messages": 1_000_000})


def _send(producer: Any, user: str, click: dict, ts: int) -> None:
    key = user.encode()
    while True:
        try:
            producer.produce("clicks", json.dumps(click).encode(), key, timestamp=ts,
                             partition=kafka_partition(key, PARTITIONS))
            return
        except BufferError:
            producer.poll(0.01)


def _app(bootstrap: str, spark: Any, workdir: str, emit_on_close: bool,
         per_trigger: int | None) -> StreamsApp:
    topics = {
        "clicks": io.kafka(bootstrap, max_records_per_trigger=per_trigger),
        "session-counts": io.kafka(bootstrap),
        "session-pages": io.kafka(bootstrap),
    }
    return StreamsApp(topology(emit_on_close=emit_on_close), "bench", topics, spark=spark,
                      checkpoint_dir=os.path.join(workdir, "checkpoint"))


def throughput(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str) -> None:
    ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
    base = 1_700_000_000_000
    clicks = [(u, c, base + ts) for u, c, ts in generate_clicks(args.records, users=args.users)]
    producer = _producer(bootstrap)
    started = time.time()
    for user, click, ts in clicks:
        _send(producer, user, click, ts)
    producer.flush(300)
    produce_s = time.time() - started
    print(f"produced {len(clicks):,} clicks in {produce_s:.1f} s "
          f"({len(clicks) / produce_s:,.0f} records/s)")
    app = _app(bootstrap, spark, workdir, True, args.per_trigger)
    steal = Steal()
    started = time.time()
    app.start()
    try:
        app.process_all_available()
        elapsed = time.time() - started
        progress = [p for p in app.query.recentProgress if p["numInputRows"]]
        metrics = app.metrics()
    finally:
        app.stop()
    from kspark.kafka.reader import read_to_end

    sessions = sum(1 for _ in read_to_end(bootstrap, "session-counts"))
    print(f"topic to topic: {len(clicks):,} records in {elapsed:.1f} s = "
          f"{len(clicks) / elapsed:,.0f} records/s on {args.master} "
          f"({len(progress)} micro-batches, {sessions:,} closed sessions written, "
          f"{metrics['dropped-records-total']:,} drops; {Steal.text(steal.fraction())}, "
          f"{load_text()})")
    for p in progress:
        d = p["durationMs"]
        print(f"  batch {p['batchId']}: {p['numInputRows']:,} rows, "
              f"{d.get('triggerExecution', 0) / 1000:.1f} s (addBatch "
              f"{d.get('addBatch', 0) / 1000:.1f} s, latestOffset "
              f"{d.get('latestOffset', 0) / 1000:.2f} s)")


def latency(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str) -> None:
    import random

    from confluent_kafka import Consumer, TopicPartition

    from kspark.kafka.reader import consumer_config
    from kspark.serdes import SessionWindowed, String

    ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
    app = _app(bootstrap, spark, workdir, False, None)
    app.start()
    keys = SessionWindowed(String())
    received: dict[str, list[tuple[int, int]]] = defaultdict(list)  # user -> [(end, seen ms)]
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(consumer_config(bootstrap, {"enable.partition.eof": False,
                                                        "fetch.wait.max.ms": 5}))
        consumer.assign([TopicPartition("session-counts", p, -2) for p in range(PARTITIONS)])
        while not stop.is_set():
            for m in consumer.consume(10_000, 0.05):
                if m.error() or m.value() is None:
                    continue
                seen = int(time.time() * 1000)
                windowed = keys.deserialize(m.key())
                received[windowed.key].append((windowed.window.end, seen))
        consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    rng = random.Random(3)
    users = [f"user-{u:05d}" for u in range(args.users)]
    producer = _producer(bootstrap)

    def click() -> tuple[str, int]:
        now = int(time.time() * 1000)
        user = rng.choice(users)
        _send(producer, user, {"page": rng.choice(PAGES)}, now)
        return user, now

    # warm up (Python workers, state stores) before the measured, steady input
    for _ in range(1000):
        click()
    producer.flush(60)
    app.process_all_available()
    warm_batches = len(app.query.recentProgress)
    sent: list[tuple[str, int]] = []
    steal = Steal()
    started = time.time()
    n = 0
    try:
        while time.time() - started < args.seconds:
            pause = started + n / args.rate - time.time()
            if pause > 0:
                time.sleep(pause)
            sent.append(click())
            producer.poll(0)
            n += 1
        producer.flush(60)
        rate = n / (time.time() - started)
        app.process_all_available(timeout=args.drain)
        caught_up = time.time() - started
        time.sleep(1.0)  # let the consumer read the last outputs
    finally:
        stop.set()
        reader.join(10)
        batches = [p for p in app.query.recentProgress[warm_batches:] if p["numInputRows"]]
        app.stop()
    cutoff = int((started + args.warmup) * 1000)
    delays, missing = [], 0
    for user, ts in sent:
        if ts < cutoff:
            continue
        seen = sorted(received.get(user, []))
        i = bisect.bisect_left(seen, (ts, -1))
        found = [s for _, s in seen[i:] if s >= ts]
        if found:
            delays.append(min(found) - ts)
        else:
            missing += 1
    delays.sort()
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in batches]
    print(f"steady input: {n:,} clicks at {rate:,.0f} records/s for {args.seconds} s "
          f"({args.users:,} users); all processed {caught_up - args.seconds:.1f} s after the "
          f"input stopped; {len(batches)} micro-batches, median batch "
          f"{statistics.median(durations) if durations else 0:.2f} s; "
          f"{Steal.text(steal.fraction())}, {load_text()}")
    if delays:
        print(f"produce-to-output latency over {len(delays):,} clicks after a "
              f"{args.warmup} s warm-up: median {statistics.median(delays) / 1000:.2f} s, "
              f"p95 {delays[int(len(delays) * 0.95)] / 1000:.2f} s, "
              f"max {delays[-1] / 1000:.2f} s ({missing} without output)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["throughput", "latency", "both"], nargs="?",
                        default="both")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--per-trigger", type=int, default=None,
                        help="max records per micro-batch (throughput; default: all)")
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10,
                        help="seconds of steady input left out of the latency figures")
    parser.add_argument("--drain", type=float, default=600.0,
                        help="at most this long to process what is left after the input")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = local_spark(args.master)
    for mode in (["throughput", "latency"] if args.mode == "both" else [args.mode]):
        workdir = tempfile.mkdtemp(prefix="kspark-bench-kafka-")
        try:
            with EmbeddedBroker(log_path=os.path.join(workdir, "broker.log")) as broker:
                (throughput if mode == "throughput" else latency)(
                    args, broker.bootstrap_servers, spark, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
