"""The steady clicks of ``benchmarks/peers_latency.py`` and their answers: a producer (run as a
process of its own) stamping each click with its production time, a reader of an engine's
session counts noting when each record arrives, and each click's latency to the first record
covering it."""

from __future__ import annotations

import bisect
import json
import struct
import threading
import time
from collections import defaultdict
from typing import Any

from kafka_job import PARTITIONS

from kspark.examples.sessions import PAGES
from kspark.hashing import kafka_partition


# -- the producer (a process of its own) ----------------------------------------------------
def produce_steady(bootstrap: str, topic: str, rate: float, users: int, seed: int,
                   stop: Any, failed: Any) -> None:
    """Clicks at ``rate`` a second until ``stop`` is set, each stamped with its production
    time; ``failed`` counts the deliveries the broker refused."""
    import random

    from confluent_kafka import Producer

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.value += 1

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                         "on_delivery": delivered})
    rng = random.Random(seed)
    # each user's key and partition and each page's value made once (Python's murmur2 and JSON
    # per click kept the rate near 20 k a second)
    keys = [f"user-{u:05d}".encode() for u in range(users)]
    partitions = [kafka_partition(key, PARTITIONS) for key in keys]
    values = [json.dumps({"page": page}).encode() for page in PAGES]
    produce, choose, below = producer.produce, rng.randrange, len(values)
    started = time.time()
    n = 0
    while not stop.is_set():
        now = time.time()
        due = int((now - started) * rate) + 1
        if n >= due:
            producer.poll(0)
            time.sleep(min(0.002, 1 / rate))
            continue
        ts = int(now * 1000)  # a millisecond's clicks are stamped alike
        for _ in range(min(due - n, 1000)):
            user = choose(users)
            while True:
                try:
                    produce(topic, values[choose(below)], keys[user], timestamp=ts,
                            partition=partitions[user])
                    break
                except BufferError:
                    producer.poll(0.01)
            n += 1
        producer.poll(0)
    producer.flush(60)


# -- the reader ---------------------------------------------------------------------------------
class Outputs(threading.Thread):
    """Reads an engine's output (``read_committed``, from the start) and notes, per user, the
    clicks each record covers and when it arrived (epoch ms): ``(first, last, seen)`` with the
    session's first and last click's timestamps (``job`` sessions), or ``(1, count, seen)``,
    the user's first to ``count``-th click (``job`` counts)."""

    def __init__(self, bootstrap: str, topic: str, kafka_streams_format: bool, job: str
                 ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.job = bootstrap, topic, job
        self.kafka_streams_format = kafka_streams_format  # else JSON with user, start, end|count
        self.received: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        self.first: float | None = None
        self.stopping = threading.Event()

    def covered(self, key: bytes, value: bytes) -> tuple[str, int, int]:
        if not self.kafka_streams_format:
            v = json.loads(value)
            return ((v["user"], 1, v["count"]) if self.job == "counts"
                    else (v["user"], v["start"], v["end"]))
        if self.job == "counts":
            return key.decode(), 1, struct.unpack(">q", value)[0]
        from kspark.serdes import SessionWindowed, String

        w = SessionWindowed(String()).deserialize(key)
        return w.key, w.window.start, w.window.end

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        from kspark.kafka.reader import consumer_config

        consumer = Consumer(consumer_config(self.bootstrap, {"enable.partition.eof": False,
                                                             "fetch.wait.max.ms": 5}))
        consumer.assign([TopicPartition(self.topic, p, -2) for p in range(PARTITIONS)])
        try:
            while not self.stopping.is_set():
                for m in consumer.consume(10_000, 0.05):
                    if m.error() or m.value() is None:
                        continue
                    seen = int(time.time() * 1000)
                    user, first, last = self.covered(m.key(), m.value())
                    self.received[user].append((first, last, seen))
                    if self.first is None:
                        self.first = time.time()
        finally:
            consumer.close()

    def answered(self, user: str, position: int) -> bool:
        return any(s <= position <= e for s, e, _ in list(self.received.get(user, ())))


Clicks = dict[str, tuple[list[int], list[int]]]


def latencies(clicks: Clicks, received: dict[str, list[tuple[int, int, int]]]
              ) -> tuple[list[int], int]:
    """Each click's latency (ms, sorted) to the first record covering it, and the clicks no
    record covers; ``clicks``: user -> (positions, sorted: timestamps or ordinals, and the
    production times)."""
    delays: list[int] = []
    missing = 0
    for user, (positions, stamps) in clicks.items():
        answer: list[int | None] = [None] * len(positions)
        after = list(range(len(positions) + 1))  # -> the first click not yet answered from here
        for first, last, seen in received.get(user, ()):  # in arrival order
            i = _first(after, bisect.bisect_left(positions, first))
            j = bisect.bisect_right(positions, last)
            while i < j:
                answer[i] = max(0, seen - stamps[i])
                after[i] = i + 1
                i = _first(after, i + 1)
        for value in answer:
            if value is None:
                missing += 1
            else:
                delays.append(value)
    delays.sort()
    return delays, missing


def _first(after: list[int], i: int) -> int:
    """The first index from ``i`` on not yet answered (``after``: a union-find's parents)."""
    root = i
    while after[root] != root:
        root = after[root]
    while after[i] != root:
        after[i], i = root, after[i]
    return root


def input_clicks(bootstrap: str, topic: str, since_ms: int, until_ms: int, job: str) -> Clicks:
    """The clicks of ``topic`` produced in ``[since_ms, until_ms)``: user -> (positions: the
    timestamps, or for ``job`` counts the click's ordinal among its user's, from the topic's
    start; production times)."""
    from kspark.kafka.reader import read_to_end

    clicks: Clicks = defaultdict(lambda: ([], []))
    seen: dict[str, int] = defaultdict(int)
    for m in read_to_end(bootstrap, topic):  # a partition at a time, in offset order
        user, ts = m.key().decode(), m.timestamp()[1]
        seen[user] += 1
        if since_ms <= ts < until_ms:
            positions, stamps = clicks[user]
            positions.append(seen[user] if job == "counts" else ts)
            stamps.append(ts)
    for user, (positions, stamps) in clicks.items():
        order = sorted(range(len(positions)), key=positions.__getitem__)
        clicks[user] = ([positions[i] for i in order], [stamps[i] for i in order])
    return dict(clicks)
