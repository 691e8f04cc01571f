"""How long kspark's JVMs take to start, with their class archives (``kspark.jvm.class_archive``)
and without (``KSPARK_CLASS_ARCHIVE=0``), alternating, each start in a fresh process:

- a local Spark session: ``local_spark()`` returning, then its first job (a small aggregation);
- the embedded Kafka broker: ``EmbeddedBroker().start()`` returning (it answers a metadata
  request), then its controlled shutdown.

Each archive is made first if it is missing (a start whose JVM writes it as it exits). Prints the
median of each figure and the CPU steal of the run.

    .venv/bin/python benchmarks/jvm_start.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from machine import Steal, load_text

SPARK = """
import json, time
began = time.perf_counter()
from kspark.spark.session import local_spark
spark = local_spark()
ready = time.perf_counter()
spark.range(1000).selectExpr("sum(id)").collect()
done = time.perf_counter()
options = spark.sparkContext.getConf().get("spark.driver.defaultJavaOptions")
print(json.dumps({"session": ready - began, "first job": done - ready,
                  "maps": "SharedArchiveFile" in options}))
"""

BROKER = """
import json, time
from kspark.kafka.broker import EmbeddedBroker
began = time.perf_counter()
broker = EmbeddedBroker().start()
ready = time.perf_counter()
with open(f"/proc/{broker.pid}/cmdline", "rb") as f:
    maps = b"SharedArchiveFile" in f.read()
broker.stop()
print(json.dumps({"broker ready": ready - began, "broker stop": time.perf_counter() - ready,
                  "maps": maps}))
"""


def run(code: str, archive: bool) -> dict[str, float]:
    env = {**os.environ, "KSPARK_CLASS_ARCHIVE": "1" if archive else "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    assert bool(figures.pop("maps")) == archive, "the archive was not there to map"
    return figures


def wait_for_archive(code: str) -> None:
    """Start once and let the JVM write its archive (it does so once the process has gone)."""
    for _ in range(3):
        try:
            run(code, True)
            return
        except AssertionError:
            time.sleep(30)  # a JVM writing its archive after its process ended
    run(code, True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="starts of each kind and setting")
    args = parser.parse_args()
    steal = Steal()
    figures: dict[tuple[str, bool], list[float]] = {}
    for code in (SPARK, BROKER):
        wait_for_archive(code)
        for _ in range(args.repeat):
            for archive in (True, False):
                for name, seconds in run(code, archive).items():
                    figures.setdefault((name, archive), []).append(seconds)
    print(f"JVM starts, median of {args.repeat} each, alternating (s):")
    print(f"  {'':<14}{'archive':>10}{'none':>10}{'ratio':>8}")
    for name in dict.fromkeys(n for n, _ in figures):
        with_it = statistics.median(figures[name, True])
        without = statistics.median(figures[name, False])
        print(f"  {name:<14}{with_it:>10.2f}{without:>10.2f}{with_it / without:>8.2f}")
    print(f"CPU {Steal.text(steal.fraction())}, {load_text()}")


if __name__ == "__main__":
    main()
