"""Benchmark: test-driver throughput of a stream-stream join: ``impressions.join(clicks, joiner,
JoinWindows.of_time_difference_and_grace(10 s, 1 s))`` (or ``left_join`` / ``outer_join``) to
topic ``joined``, on the ad-impressions workload of ``benchmarks/join_workload.py`` (200 k
records, about half on each topic, String keys of 10 k users, small JSON values, timestamps
increasing but for 5 % of the records, held back by up to 0.5 s).

    .venv/bin/python benchmarks/driver_stream_join.py --records 200000 --repeat 3 --kafka-streams
    .venv/bin/python benchmarks/driver_stream_join.py --kind left --kafka-streams
    .venv/bin/python benchmarks/driver_stream_join.py --kind outer --kafka-streams --pure-python-too

Prints records/s of each run (every record piped serialized, processed and committed, as the
driver does after every record) and the best run, the records written to ``joined`` and a
checksum of them (key, imp id, click id and timestamp of each output record, in order); with
``--kafka-streams`` also Kafka Streams 4.3.1's own ``TopologyTestDriver`` on the same records
(``kspark.anchor.DriverStreamJoin`` of ``benchmarks/kafka-streams-anchor/``, the same topology
in Java, ``--kafka-streams-runs`` runs in one JVM, compared at its best run once its JIT has
levelled off: ``kafka_streams_anchor.levelled``), side by side, with both
engines' output counts and checksums compared; with ``--pure-python-too`` kspark once more as
pure Python (``KSPARK_PURE_PYTHON=1``, ``benchmarks/pure_python.py``).

Kafka Streams runs with its default (RocksDB) stores unless ``--kafka-streams-store
in_memory``, and with its internal setting that makes left and outer joins look for closed
windows after every record (``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``
= 0) instead of once per wall-clock second: the driver's mock clock stands still, so by default
they would emit the unmatched records only once; kspark looks after every record
(docs/semantics.md §9.1).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import zlib

import join_workload as w
from kafka_streams_anchor import JVM_OPTIONS, add_driver_options, levelled_text, run_test_driver
from machine import Steal, load_text
from pure_python import add_option, core_mode, run_pure

from kspark import JoinWindows, StreamJoined, StreamsBuilder, serdes
from kspark.testing import TopologyTestDriver

OUTPUT = "joined"
METHODS = {"inner": "join", "left": "left_join", "outer": "outer_join"}
MASK = (1 << 64) - 1


def topology(kind: str, diff_ms: int, grace_ms: int) -> object:
    builder = StreamsBuilder()
    impressions = builder.stream(w.IMPRESSIONS, serdes.String(), serdes.Json())
    clicks = builder.stream(w.CLICKS, serdes.String(), serdes.Json())
    join = getattr(impressions, METHODS[kind])
    (join(clicks, w.joiner, JoinWindows.of_time_difference_and_grace(diff_ms, grace_ms),
          StreamJoined.with_(serdes.String(), serdes.Json(), serdes.Json()))
     .to(OUTPUT, serdes.String(), serdes.Json()))
    return builder.build()


def checksum(rows: list[tuple[str, object, object, int]]) -> int:
    """The checksum ``DriverStreamJoin.java`` computes too: over the output records in order,
    ``h = h * 31 + crc32("key|imp|click|timestamp")`` modulo 2**64, a missing side "null"."""
    h = 0
    for key, imp, click, ts in rows:
        line = f"{key}|{'null' if imp is None else imp}|{'null' if click is None else click}|{ts}"
        h = (h * 31 + zlib.crc32(line.encode())) & MASK
    return h


def run(records: tuple, kind: str, diff_ms: int, grace_ms: int) -> tuple[float, int, int, dict]:
    """Pipe ``records``; return (seconds, output records, their checksum, metrics)."""
    # a closed driver's stores are freed by the cyclic collector only: collect the previous
    # run's now, so that no run pays for the one before it
    gc.collect()
    gc.freeze()
    with TopologyTestDriver(topology(kind, diff_ms, grace_ms)) as driver:
        pipes = {t: driver.create_input_topic(t, serdes.String(), serdes.Json()).pipe_input
                 for t in w.TOPICS}
        t0 = time.perf_counter()
        for topic, key, value, ts in records:
            pipes[topic](key, value, ts)
        elapsed = time.perf_counter() - t0
        out = driver.create_output_topic(OUTPUT, serdes.String(), serdes.Json())
        rows = [(r.key, r.value["imp"], r.value["click"], r.timestamp)
                for r in out.read_records_to_list()]
        return elapsed, len(rows), checksum(rows), driver.metrics()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--kind", choices=["inner", "left", "outer"], default="inner")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--diff-ms", type=int, default=w.DIFF_MS,
                        help="JoinWindows' time difference (default 10 s)")
    parser.add_argument("--grace-ms", type=int, default=w.GRACE_MS,
                        help="JoinWindows' grace (default 1 s)")
    add_driver_options(parser)
    add_option(parser)
    args = parser.parse_args()
    print(core_mode())
    frame = w.make_frame(args.records, args.users)
    records = w.records(frame)
    counts = frame["topic"].value_counts()
    print(f"workload: {len(records):,} records ({counts.get(w.IMPRESSIONS, 0):,} impressions, "
          f"{counts.get(w.CLICKS, 0):,} clicks), {args.users:,} users; "
          f"impressions.{METHODS[args.kind]}"
          f"(clicks, JoinWindows.of_time_difference_and_grace({args.diff_ms} ms, "
          f"{args.grace_ms} ms))")
    print("kspark: TopologyTestDriver, in-memory window stores with changelogs (kspark's "
          "default), a commit after every record")
    steal = Steal()
    best = 0.0
    ours = None
    for i in range(args.repeat):
        elapsed, out, digest, metrics = run(records, args.kind, args.diff_ms, args.grace_ms)
        rate = len(records) / elapsed
        best = max(best, rate)
        ours = (out, digest)
        print(f"run {i + 1}: {len(records):,} records in {elapsed:.2f}s = {rate:,.0f} rec/s; "
              f"{out:,} records out (checksum {digest}), "
              f"{metrics['dropped-records-total']} dropped")
    print(f"driver_stream_join {args.kind} best: {best:,.0f} rec/s")
    differ = False
    if args.kafka_streams:
        print(f"Kafka Streams 4.3.1: TopologyTestDriver, {args.kafka_streams_store} stores, "
              f"JVM {' '.join(JVM_OPTIONS)}, {args.kafka_streams_runs} runs in one JVM, left/outer "
              "joins looking for closed windows after every record (internal emit interval "
              "0 ms)")
        rows = ((topic, key, json.dumps(value, separators=(",", ":")), ts)
                for topic, key, value, ts in records)
        rates = []
        for i, (n, seconds, their_out, their_digest) in enumerate(run_test_driver(
                "DriverStreamJoin", rows, args.kind, str(args.diff_ms), str(args.grace_ms),
                str(args.kafka_streams_runs), args.kafka_streams_store)):
            if int(n) != len(records):
                sys.exit(f"Kafka Streams' driver read {n} of {len(records)} records")
            rate = int(n) / float(seconds)
            rates.append(rate)
            same = ours == (int(their_out), int(their_digest))
            differ |= not same
            print(f"Kafka Streams run {i + 1}: {rate:,.0f} rec/s; {int(their_out):,} records "
                  f"out (checksum {their_digest})"
                  + ("" if same else f"  DIFFERENT from kspark's {ours[0]:,} ({ours[1]})"))
        text, theirs = levelled_text(rates)
        print(f"Kafka Streams TopologyTestDriver: {text}; kspark {best / theirs:.2f}x")
        print("outputs: " + ("DIFFER (see above)" if differ else
                             f"the same {ours[0]:,} records in the same order in both engines"))
    print(f"CPU {Steal.text(steal.fraction())}, {load_text()}")
    if args.pure_python_too:
        run_pure(__file__, sys.argv[1:], drop=("--kafka-streams",))
    if differ:
        sys.exit("kspark's and Kafka Streams' drivers wrote different records (see above)")


if __name__ == "__main__":
    main()
