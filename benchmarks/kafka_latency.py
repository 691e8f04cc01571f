"""Benchmark mode ``latency`` of ``benchmarks/kafka_end_to_end.py``.

For each engine in turn, clicks are produced at a steady rate (5 k/s by default)
for a bounded time to an input topic of its own, each with the wall-clock time of its
production as timestamp; the app emits session updates (emit on update through its cache). A
click's latency is the time from its production until the consumer of the output topic
(``read_committed``) receives the first update of its user's session whose end is at or after
the click's timestamp. Each app is warmed up first (1000 clicks processed); the first
``--warmup`` seconds of steady input are left out. kspark runs micro-batches back to back
(no trigger interval): each commits its Kafka transaction and flushes its cache, and the next
starts at once. Kafka Streams commits (and flushes its cache) every ``--ks-commit-ms``, by
default 100 ms, its own default under exactly-once: each engine at its default setting for
the freshest output exactly-once allows, the record caches at their defaults.
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kafka_job import (
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
from machine import Steal, load_text

from kspark.examples.sessions import PAGES
from kspark.kafka import TopicSpec, ensure_topics


def latency(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: str) -> None:
    results: dict[str, dict[str, Any]] = {}
    for engine in args.engines:
        run = _kspark_latency if engine == "kspark" else _kstreams_latency
        results[engine] = run(args, bootstrap, spark, workdir)
    print(f"\nlatency, clicks produced at a steady {args.rate:,}/s for {args.seconds} s "
          f"({args.users:,} users), produce to the first output of the session, the first "
          f"{args.warmup} s left out:")
    side_by_side([
        ("input rate reached, records/s", {e: f"{r['rate']:,.0f}" for e, r in results.items()}),
        ("median latency, s", {e: r["median"] for e, r in results.items()}),
        ("p95 latency, s", {e: r["p95"] for e, r in results.items()}),
        ("max latency, s", {e: r["max"] for e, r in results.items()}),
        ("clicks measured / without output",
         {e: f"{r['measured']:,} / {r['missing']:,}" for e, r in results.items()}),
        ("all processed after the input, s",
         {e: f"{r['drained']:.1f}" for e, r in results.items()}),
        ("CPU steal", {e: r["steal"] for e, r in results.items()}),
        ("load at the end", {e: r["load"] for e, r in results.items()}),
    ], list(args.engines))


def _kspark_latency(args: argparse.Namespace, bootstrap: str, spark: Any,
                    workdir: str) -> dict[str, Any]:
    ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
    app = kspark_app(bootstrap, spark, workdir, False, None)
    app.start()
    warm_batches = 0

    def warmed() -> None:
        nonlocal warm_batches
        warm_batches = len(app.query.recentProgress)

    try:
        result = _steady(args, bootstrap, "kspark", app.process_all_available, warmed)
    finally:
        batches = [p for p in app.query.recentProgress[warm_batches:] if p["numInputRows"]]
        app.stop()
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in batches]
    print(f"kspark: {len(batches)} micro-batches, median "
          f"{statistics.median(durations) if durations else 0:.2f} s, "
          f"p90 {_quantile(durations, 0.9):.2f} s, max {max(durations, default=0):.2f} s")
    for p in sorted(batches, key=lambda p: -p["durationMs"]["triggerExecution"])[:3]:
        print(f"kspark: a slow micro-batch ({p['numInputRows']:,} input rows): " + ", ".join(
            f"{k} {v}" for k, v in sorted(p["durationMs"].items()) if v >= 20))
    if batches:  # where a micro-batch's time goes (Spark's own phases), medians in ms
        phases = sorted({k for p in batches for k in p["durationMs"]})
        print("kspark: median ms per phase: " + ", ".join(
            f"{k} {statistics.median(p['durationMs'].get(k, 0) for p in batches):.0f}"
            for k in phases))
    return result


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 when empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def _kstreams_latency(args: argparse.Namespace, bootstrap: str, spark: Any,
                      workdir: str) -> dict[str, Any]:
    topic = TOPICS["kstreams"][0]
    ensure_topics(bootstrap, [TopicSpec(topic, PARTITIONS)])
    app = kstreams_app(args, bootstrap, workdir, "kstreams-latency", topic, False)
    app.start()
    try:
        result = _steady(args, bootstrap, "kstreams",
                         lambda timeout: app.wait_caught_up(end_offsets(bootstrap, topic),
                                                            timeout))
    finally:
        app.stop()
    print(f"Kafka Streams: commit every {args.ks_commit_ms} ms, {args.ks_threads} stream threads")
    return result


def _steady(args: argparse.Namespace, bootstrap: str, engine: str,
            wait_processed: Callable[[float], Any],
            warmed: Callable[[], None] | None = None) -> dict[str, Any]:
    """Steady input to ``engine``'s input topic and the latency of its session updates (see the
    module's documentation); ``wait_processed(timeout)`` returns when the app has processed all
    input produced so far."""
    from confluent_kafka import Consumer, TopicPartition

    from kspark.kafka.reader import consumer_config
    from kspark.serdes import SessionWindowed, String

    input_topic, counts_topic, _ = TOPICS[engine]
    keys = SessionWindowed(String())
    received: dict[str, list[tuple[int, int]]] = defaultdict(list)  # user -> [(end, seen ms)]
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(consumer_config(bootstrap, {"enable.partition.eof": False,
                                                        "fetch.wait.max.ms": 5}))
        consumer.assign([TopicPartition(counts_topic, p, -2) for p in range(PARTITIONS)])
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
    rng = random.Random(3)  # the same users and pages for each engine
    users = [f"user-{u:05d}" for u in range(args.users)]
    producer = make_producer(bootstrap)

    def click() -> tuple[str, int]:
        now = int(time.time() * 1000)
        user = rng.choice(users)
        send(producer, user, {"page": rng.choice(PAGES)}, now, input_topic)
        return user, now

    try:
        # warm up (Python workers or the JVM's JIT, state stores) before the measured input
        for _ in range(1000):
            click()
        producer.flush(60)
        wait_processed(300.0)
        if warmed is not None:
            warmed()
        sent: list[tuple[str, int]] = []
        steal = Steal()
        started = time.time()
        n = 0
        while time.time() - started < args.seconds:
            pause = started + n / args.rate - time.time()
            if pause > 0:
                time.sleep(pause)
            sent.append(click())
            producer.poll(0)
            n += 1
        producer.flush(60)
        rate = n / (time.time() - started)
        wait_processed(args.drain)
        caught_up = time.time() - started
        fraction = steal.fraction()
        load = load_text()
        time.sleep(1.0)  # let the consumer read the last outputs
    finally:
        stop.set()
        reader.join(10)
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

    def seconds(ms: float | None) -> str:
        return "-" if ms is None else f"{ms / 1000:.2f}"

    result = {
        "rate": rate, "drained": caught_up - args.seconds, "measured": len(delays),
        "missing": missing, "steal": Steal.text(fraction), "load": load,
        "median": seconds(statistics.median(delays) if delays else None),
        "p95": seconds(delays[int(len(delays) * 0.95)] if delays else None),
        "max": seconds(delays[-1] if delays else None),
    }
    print(f"{ENGINES[engine]}: {n:,} clicks at {rate:,.0f} records/s for {args.seconds} s; "
          f"latency median {result['median']} s, p95 {result['p95']} s, max {result['max']} s "
          f"({missing} without output); all processed {result['drained']:.1f} s after the "
          f"input stopped; {result['steal']}, {load}")
    return result
