"""Benchmark: test-driver throughput of a DSL session-window count (gap 10 s, grace 10 s) on the
clickstream workload (``benchmarks/clickstream.py``: 1 M events, 10 k users by default).

    .venv/bin/python benchmarks/driver_session_count.py --records 1000000 --repeat 2

Prints records/s per emit strategy (on_window_update with caching, the default, and
on_window_close), the sessions in the store at the end and the dropped-record count; with
``--baselines`` also the driver's floor on the same records: a source straight into a sink,
and a key-value count with caching; with ``--parts`` the same count without its changelog,
without its sink, and without both (what each part of a record's path costs); with
``--kafka-streams`` Kafka Streams 4.3.1's own ``TopologyTestDriver`` on the same records
(``kspark.anchor.DriverSessionCount`` of ``benchmarks/kafka-streams-anchor/``, built once and
cached), side by side, with the records each engine wrote compared; with ``--pure-python-too``
kspark once more as pure Python (``KSPARK_PURE_PYTHON=1``, ``benchmarks/pure_python.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import pandas as pd
from kafka_streams_anchor import add_driver_options, levelled_text, run_test_driver
from machine import Steal, load_text
from pure_python import add_option, core_mode, run_pure
from session_workload import load_gen, session_count_topology

from kspark import EmitStrategy, Materialized, SessionWindows, StreamsBuilder, serdes
from kspark.testing import TopologyTestDriver

#: ``--parts``: the session count without its changelog, its sink, or both
PARTS = {"no changelog": (False, True), "no sink": (True, False),
         "no changelog, no sink": (False, False)}


def events(frame: pd.DataFrame) -> tuple[tuple[str, int, int], ...]:
    """The events as ``(key, value, timestamp)``, in a tuple: the garbage collector stops
    tracking it, so the benchmark's own input adds nothing to the driver's collections."""
    return tuple(zip(frame["key"].tolist(), frame["value"].tolist(), frame["ts"].tolist()))


def run(frame: pd.DataFrame, gap: int, grace: int, on_close: bool,
        topology: Any = None) -> tuple[float, dict]:
    """Pipe every event through ``topology`` (default: the session count); return (seconds,
    figures)."""
    rows = events(frame)
    if topology is None:
        topology = session_count_topology(gap, grace, on_close, serdes.Long())
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Long())
        t0 = time.perf_counter()
        for k, v, ts in rows:
            pipe.pipe_input(k, v, ts)
        elapsed = time.perf_counter() - t0
        out = (driver.create_output_topic("sessions").get_queue_size()
               if "sessions" in driver.topology.sink_topics() else 0)
        stored = len(driver.get_session_store("session-counts").all())
        metrics = driver.metrics()
    return elapsed, {
        "out": out,
        "stored": stored,
        "dropped": metrics["dropped-records-total"],
    }


def part_topology(gap: int, grace: int, logged: bool, sink: bool) -> Any:
    """The session count on update (caching on), its store logged or not, its output written
    to topic ``sessions`` or to nothing."""
    builder = StreamsBuilder()
    materialized = Materialized("session-counts")
    if not logged:
        materialized = materialized.with_logging_disabled()
    counts = (builder.stream("clicks", serdes.String(), serdes.Long()).group_by_key()
              .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
              .emit_strategy(EmitStrategy.on_window_update()).count(materialized))
    if sink:
        counts.to_stream().to("sessions", serdes.SessionWindowed(serdes.String()), serdes.Long())
    return builder.build()


def run_kafka_streams(frame: pd.DataFrame, gap: int, grace: int, on_close: bool, repeat: int,
                      store: str) -> list[dict[str, float]]:
    """Kafka Streams' TopologyTestDriver on the same events (one JVM, ``repeat`` runs, its DSL
    stores of type ``store``): per run its seconds, records written, sessions stored at the end
    and records dropped."""
    runs = []
    for _, records, seconds, out, stored, dropped in run_test_driver(
            "DriverSessionCount", events(frame), str(gap), str(grace),
            "close" if on_close else "update", str(repeat), store):
        if int(records) != len(frame):
            raise RuntimeError(f"Kafka Streams' driver read {records} of {len(frame)} events")
        runs.append({"seconds": float(seconds), "out": int(out), "stored": int(stored),
                     "dropped": int(float(dropped))})
    return runs


def baseline_topology(kind: str) -> object:
    """clicks straight into a sink (``pass``), or a count per key with caching (``count``)."""
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", serdes.String(), serdes.Long())
    if kind == "pass":
        clicks.to("out", serdes.String(), serdes.Long())
    else:
        (clicks.group_by_key().count(Materialized("counts")).to_stream()
         .to("out", serdes.String(), serdes.Long()))
    return builder.build()


def run_baseline(frame: pd.DataFrame, kind: str) -> float:
    """Seconds to pipe every event through :func:`baseline_topology`."""
    rows = events(frame)
    with TopologyTestDriver(baseline_topology(kind)) as driver:
        pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Long())
        t0 = time.perf_counter()
        for k, v, ts in rows:
            pipe.pipe_input(k, v, ts)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--emit", choices=["update", "close", "both"], default="both", help="emit strategy"
    )
    parser.add_argument("--baselines", action="store_true",
                        help="also the driver's floor: a source into a sink, a key-value count")
    parser.add_argument("--parts", action="store_true",
                        help="also the count on update without its changelog, its sink, both")
    add_driver_options(parser)
    add_option(parser)
    args = parser.parse_args()
    print(core_mode())
    gen = load_gen()
    frame = pd.read_parquet(gen.make(args.records, args.keys))
    steal = Steal()
    if args.baselines:
        for kind, name in (("pass", "source into sink"), ("count", "key-value count+caching")):
            best = max(len(frame) / run_baseline(frame, kind) for _ in range(args.repeat))
            print(f"driver baseline {name} best: {best:,.0f} rec/s "
                  f"({1e6 / best:.1f} us a record)")
    if args.parts:
        for name, (logged, sink) in PARTS.items():
            best = max(len(frame) / run(frame, gen.GAP_MS, gen.GRACE_MS, False, part_topology(
                gen.GAP_MS, gen.GRACE_MS, logged, sink))[0] for _ in range(args.repeat))
            print(f"on_window_update+caching, {name} best: {best:,.0f} rec/s "
                  f"({1e6 / best:.1f} us a record)")
    strategies = {"update": [False], "close": [True], "both": [False, True]}[args.emit]
    for on_close in strategies:
        name = "on_window_close" if on_close else "on_window_update+caching"
        best = 0.0
        for i in range(args.repeat):
            elapsed, figures = run(frame, gen.GAP_MS, gen.GRACE_MS, on_close)
            rate = len(frame) / elapsed
            best = max(best, rate)
            print(
                f"{name} run {i + 1}: {len(frame)} records {args.keys} keys in {elapsed:.2f}s "
                f"= {rate:,.0f} rec/s; {figures['out']} records out, {figures['stored']} "
                f"sessions stored at end, {figures['dropped']} dropped"
            )
        print(f"driver_session_count {name} best: {best:,.0f} rec/s")
        if args.kafka_streams:
            runs = run_kafka_streams(frame, gen.GAP_MS, gen.GRACE_MS, on_close,
                                     args.kafka_streams_runs, args.kafka_streams_store)
            for i, r in enumerate(runs):
                print(f"Kafka Streams {name} run {i + 1}: {len(frame) / r['seconds']:,.0f} "
                      f"rec/s; {r['out']} records out, {r['stored']} sessions stored at end, "
                      f"{r['dropped']} dropped")
            text, theirs = levelled_text([len(frame) / r["seconds"] for r in runs])
            print(f"Kafka Streams TopologyTestDriver ({args.kafka_streams_store} store) {name}: "
                  f"{text}; kspark {best / theirs:.2f}x")
            outs = {(r["out"], r["dropped"]) for r in runs}
            if outs != {(figures["out"], figures["dropped"])}:
                print(f"  records out (dropped): kspark {figures['out']} "
                      f"({figures['dropped']}), Kafka Streams "
                      + ", ".join(f"{o} ({d})" for o, d in sorted(outs))
                      + (" (on close Kafka Streams' store can drop a session before it is "
                         "emitted: README, deviations on purpose)" if on_close else ""))
    print(f"CPU {Steal.text(steal.fraction())}, {load_text()}")
    if args.pure_python_too:
        run_pure(__file__, sys.argv[1:], drop=("--kafka-streams", "--baselines", "--parts"))


if __name__ == "__main__":
    main()
