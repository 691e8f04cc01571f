"""Benchmark: test-driver throughput of a DSL session-window count (gap 10 s, grace 10 s) on the
clickstream workload (``benchmarks/clickstream.py``: 1 M events, 10 k users by default).

    .venv/bin/python benchmarks/driver_session_count.py --records 1000000 --repeat 2

Prints records/s per emit strategy (on_window_update with caching, the default, and
on_window_close), the sessions in the store at the end and the dropped-record count; with
``--baselines`` also the driver's floor on the same records: a source straight into a sink,
and a key-value count with caching.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from session_workload import load_gen, session_count_topology

from kspark import Materialized, StreamsBuilder, serdes
from kspark.testing import TopologyTestDriver


def run(frame: pd.DataFrame, gap: int, grace: int, on_close: bool) -> tuple[float, dict]:
    """Pipe every event; return (seconds, figures)."""
    keys = frame["key"].tolist()
    stamps = frame["ts"].tolist()
    values = frame["value"].tolist()
    with TopologyTestDriver(session_count_topology(gap, grace, on_close, serdes.Long())) as driver:
        pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Long())
        t0 = time.perf_counter()
        for k, v, ts in zip(keys, values, stamps):
            pipe.pipe_input(k, v, ts)
        elapsed = time.perf_counter() - t0
        out = driver.create_output_topic("sessions").get_queue_size()
        stored = len(driver.get_session_store("session-counts").all())
        metrics = driver.metrics()
    return elapsed, {
        "out": out,
        "stored": stored,
        "dropped": metrics["dropped-records-total"],
    }


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
    with TopologyTestDriver(baseline_topology(kind)) as driver:
        pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Long())
        t0 = time.perf_counter()
        for k, v, ts in zip(frame["key"].tolist(), frame["value"].tolist(),
                            frame["ts"].tolist()):
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
    args = parser.parse_args()
    gen = load_gen()
    frame = pd.read_parquet(gen.make(args.records, args.keys))
    if args.baselines:
        for kind, name in (("pass", "source into sink"), ("count", "key-value count+caching")):
            best = max(len(frame) / run_baseline(frame, kind) for _ in range(args.repeat))
            print(f"driver baseline {name} best: {best:,.0f} rec/s "
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


if __name__ == "__main__":
    main()
