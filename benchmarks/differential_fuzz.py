"""Differential fuzzing of kspark against Kafka Streams (the oracle in ``oracle/``).

    .venv/bin/python benchmarks/differential_fuzz.py --cases 10000 [--shapes session,...]
        [--seed N] [--batch 500] [--show 3]

For each shape of ``tests/oracle/oracle_cases.py``, hypothesis generates ``--cases`` random
cases (no shrinking), the oracle runs them in one JVM (batches of ``--batch`` cases per round
trip) and kspark's test driver runs them too; the script prints per shape the number of cases,
of differences and of cases the oracle refused, the time each side took, and the smallest
differing cases (``--show``). Exit code 1 if any shape differed.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "oracle"))

from comparison import difference, to_oracle
from hypothesis import HealthCheck, Phase, given, settings
from kspark_side import run as run_kspark
from oracle_cases import STRATEGIES

from oracle import Oracle, OracleCaseError, jar_path


def generate(shape: str, n: int, seed: int) -> list[dict]:
    """``n`` cases of ``shape`` drawn by hypothesis (generation only)."""
    cases: list[dict] = []

    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(STRATEGIES[shape])
    def collect(case: dict) -> None:
        cases.append(case)

    collect._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    collect()
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per shape")
    parser.add_argument("--shapes", default=",".join(STRATEGIES),
                        help=f"comma-separated, of: {', '.join(STRATEGIES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=500, help="cases per JVM round trip")
    parser.add_argument("--show", type=int, default=2, help="differing cases shown per shape")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # kspark logs each dropped record's summary
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in shapes if s not in STRATEGIES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; known: {list(STRATEGIES)}")
    started = time.monotonic()
    jar = jar_path()
    print(f"oracle jar {jar} ({time.monotonic() - started:.1f} s to find or build)")
    print(f"{'shape':<24}{'cases':>8}{'differ':>8}{'refused':>9}{'gen s':>8}{'kafka s':>9}"
          f"{'kspark s':>10}")
    failed = False
    reports = []
    with Oracle(jar) as oracle:
        for shape in shapes:
            t0 = time.monotonic()
            # every case also compares the topology's description, character for character
            cases = [{**c, "describe": True} for c in generate(shape, args.cases, args.seed)]
            t1 = time.monotonic()
            kafka = []
            for i in range(0, len(cases), args.batch):
                kafka += oracle.run_many([to_oracle(c) for c in cases[i:i + args.batch]])
            t2 = time.monotonic()
            diffs, refused = [], 0
            for case, expected in zip(cases, kafka):
                if isinstance(expected, OracleCaseError):
                    refused += 1
                    reports.append(f"[{shape}] oracle refused {case}: {expected}")
                    continue
                report = difference(case, expected, run_kspark(case))
                if report is not None:
                    diffs.append((len(case["inputs"]), report))
            t3 = time.monotonic()
            failed |= bool(diffs or refused)
            print(f"{shape:<24}{len(cases):>8}{len(diffs):>8}{refused:>9}{t1 - t0:>8.1f}"
                  f"{t2 - t1:>9.1f}{t3 - t2:>10.1f}", flush=True)
            for _, report in sorted(diffs, key=lambda d: d[0])[:args.show]:
                reports.append(f"[{shape}] smallest differences:\n{report}")
    for report in reports:
        print("\n" + report)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
