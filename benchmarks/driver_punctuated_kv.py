"""Benchmark: test-driver throughput of a Processor-API processor with a key-value store and a
STREAM_TIME punctuator (``kspark.examples.click_counter``: counts per user, all counts forwarded
every 60 s of stream time).

    .venv/bin/python benchmarks/driver_punctuated_kv.py --records 200000 --repeat 3

Prints records/s of each run (piping serialized input, processing, punctuating and committing
after every record, as the driver does) and the best run; with ``--kafka-streams`` also Kafka
Streams 4.3.1's own ``TopologyTestDriver`` on the same clicks (``kspark.anchor.DriverClickCounter``
of ``benchmarks/kafka-streams-anchor/``, the example's processor in Java), side by side; with
``--pure-python-too`` kspark once more as pure Python (``KSPARK_PURE_PYTHON=1``,
``benchmarks/pure_python.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from kafka_streams_anchor import add_driver_options, levelled_text, run_test_driver
from machine import Steal, load_text
from pure_python import add_option, core_mode, run_pure

from kspark import serdes
from kspark.examples import click_counter
from kspark.testing import TopologyTestDriver


def run(records: tuple[tuple[str, dict, int], ...]) -> tuple[float, int, dict[str, int]]:
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
    add_driver_options(parser, store=False)
    add_option(parser)
    args = parser.parse_args()
    print(core_mode())
    # a tuple: once the collector stops tracking it, the input adds nothing to its collections
    records = tuple(click_counter.generate_clicks(args.records, users=args.users))
    steal = Steal()
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
    if args.kafka_streams:
        rows = ((user, json.dumps(click), ts) for user, click, ts in records)
        rates = []
        for i, (n, seconds, their_out) in enumerate(
                run_test_driver("DriverClickCounter", rows, str(args.kafka_streams_runs))):
            rate = int(n) / float(seconds)
            rates.append(rate)
            print(f"Kafka Streams run {i + 1}: {rate:,.0f} rec/s; {their_out} records out"
                  + ("" if int(their_out) == out else f" (kspark: {out})"))
        text, theirs = levelled_text(rates)
        print(f"Kafka Streams TopologyTestDriver: {text}; kspark {best / theirs:.2f}x")
    print(f"CPU {Steal.text(steal.fraction())}, {load_text()}")
    if args.pure_python_too:
        run_pure(__file__, sys.argv[1:], drop=("--kafka-streams",))


if __name__ == "__main__":
    main()
