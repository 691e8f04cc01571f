"""Benchmark: test-driver throughput of a Processor-API processor with a key-value store and a
STREAM_TIME punctuator (``kspark.examples.click_counter``: counts per user, all counts forwarded
every 60 s of stream time).

    .venv/bin/python benchmarks/driver_punctuated_kv.py --records 200000 --repeat 3

Prints records/s of each run (piping serialized input, processing, punctuating and committing
after every record, as the driver does) and the best run.
"""

from __future__ import annotations

import argparse
import time

from kspark import serdes
from kspark.examples import click_counter
from kspark.testing import TopologyTestDriver


def run(records: list[tuple[str, dict, int]]) -> tuple[float, int, dict[str, int]]:
    """Pipe ``records``; return (seconds, output records, metrics)."""
    with TopologyTestDriver(click_counter.topology()) as driver:
        pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
        t0 = time.perf_counter()
        for user, click, ts in records:
            pipe.pipe_input(user, click, ts)
        elapsed = time.perf_counter() - t0
        out = driver.create_output_topic("click-counts-report").get_queue_size()
        return elapsed, out, driver.metrics()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    records = list(click_counter.generate_clicks(args.records, users=args.users))
    best = 0.0
    for i in range(args.repeat):
        elapsed, out, metrics = run(records)
        rate = args.records / elapsed
        best = max(best, rate)
        print(
            f"run {i + 1}: {args.records} records {args.users} users in {elapsed:.2f}s = "
            f"{rate:,.0f} rec/s; {out} records out, {metrics['punctuate-total']} punctuations"
        )
    print(f"driver_punctuated_kv best: {best:,.0f} rec/s")


if __name__ == "__main__":
    main()
