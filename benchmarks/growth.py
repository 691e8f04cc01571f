"""Benchmark: how kspark's cost grows with the records, the keys and the cores, on the main job
(the sessions example from a Kafka topic to Kafka topics, exactly once, as ``benchmarks/peers.py``
runs it): records/s of the measured run, CPU seconds per million records and the peak resident
memory of all kspark's processes together (its Spark driver JVM, its Python workers; PSS, see
``machine.ProcessTree``), for each run of
``--runs``, one after the other on one embedded Apache Kafka broker.

    .venv/bin/python benchmarks/growth.py                       # the default runs, below
    .venv/bin/python benchmarks/growth.py --runs 1M:10k:local[2],1M:10k:local[1] --chart g.png
    .venv/bin/python benchmarks/growth.py --runs 10M:10k:spark://host:7077

A run is ``records:keys:master`` (``k`` and ``M`` suffixes), or
``records:keys:master:per-trigger`` (its ``k`` or ``M`` required) to cap each micro-batch at
that many clicks (the source's ``max_records_per_trigger``: what bounds the memory of a run
over a backlog). The default set: 1 M, 10 M and 50 M records of 10 k users (10 M and 50 M in
micro-batches of 2 M and 5 M: a 50 M backlog in one micro-batch needs more memory than this
machine has); 10 M records of 1 M and of 10 M users; 1 M records of 10 k users on
``local[1]`` against the same on ``local[2]``. Each run is its own process
(``benchmarks/peers/kspark_sessions.py``): a warm-up on ``--warm-up`` other clicks, then the
measured run from ``StreamsApp.start()`` to its last micro-batch's Kafka transaction committed.

The clicks are made as they are produced, in bounded memory whatever their number (each user's
clicks 0-8 s apart within a session, sessions 60-600 s apart, about 5 % a few seconds out of
order and 2 % after their session closed: the sessions example's generator, its users taking
turns by time instead of being drawn at random, so that no run needs all its clicks in memory).
Every run's output is checked: no session written twice, no tombstone; runs of at most
``--check-up-to`` records are compared with kspark's test driver session by session (as
``peers.py`` does) and the run exits non-zero at any difference. ``--chart`` writes a PNG of
records/s and peak memory per run (the ``plot`` extra: matplotlib).
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from charts import bars
from kafka_job import PARTITIONS
from kafka_streams_anchor import prepare_coordinators
from machine import Steal, load_text
from peers import PEERS, compare, produce, read_sessions, reference, run_process

from kspark.examples.sessions import GAP_MS, GRACE_MS, PAGES
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics

DEFAULT_RUNS = ("1M:10k:local[2],10M:10k:local[2]:2M,50M:10k:local[2]:5M,10M:1M:local[2],"
                "10M:10M:local[2],1M:10k:local[1]")
#: the mean time between a user's clicks (ms): 90 % within a session (0-8 s), 10 % a new one
MEAN_STEP_MS = 0.9 * 4_000 + 0.1 * 330_000


def amount(text: str) -> int:
    """``10k`` -> 10000, ``50M`` -> 50000000."""
    match = re.fullmatch(r"(\d+)([kM]?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not an amount: {text!r} (e.g. 10k, 50M)")
    return int(match[1]) * {"": 1, "k": 1_000, "M": 1_000_000}[match[2]]


def parse_runs(text: str) -> list[tuple[int, int, str, int | None]]:
    """``records:keys:master[:per-trigger]`` runs; a master may hold colons of its own
    (``spark://host:7077``), a per-trigger cap is an amount with its suffix after the last one
    (``500k``, ``2M``)."""
    runs = []
    for spec in text.split(","):
        records, keys, rest = spec.split(":", 2)
        master, _, cap = rest.rpartition(":")
        if not master or not re.fullmatch(r"\d+[kM]", cap):
            master, cap = rest, ""
        runs.append((amount(records), amount(keys), master, amount(cap) if cap else None))
    return runs


def stream_clicks(n: int, users: int, seed: int, end_ms: int,
                  late_fraction: float = 0.02) -> Iterator[tuple[str, dict, int]]:
    """``n`` clicks ``(user, {"page": p}, timestamp)`` in arrival order, in memory bounded by
    the users and the longest delay (see the module), timestamps ending about ``end_ms``."""
    rng = random.Random(seed)
    width = max(4, len(str(users - 1)))
    span = int(n / users * MEAN_STEP_MS * 1.5) + 400_000
    base = end_ms - span
    due = [(base + rng.randrange(0, 300_000), u) for u in range(users)]
    heapq.heapify(due)
    waiting: list[tuple[int, int, int, int]] = []  # (arrival, sequence, timestamp, user)
    for seq in range(n):
        ts, user = due[0]
        step = (rng.randrange(60_000, 600_000) if rng.random() < 0.1
                else rng.randrange(0, 8_000))
        heapq.heapreplace(due, (ts + step, user))
        r = rng.random()
        arrival = ts
        if r < late_fraction:
            arrival = ts + GAP_MS + GRACE_MS + rng.randrange(30_000, 90_000)
        elif r < late_fraction + 0.05:
            arrival = ts + rng.randrange(0, 8_000)
        heapq.heappush(waiting, (arrival, seq, ts, user))
        # every click still to come has a timestamp (and an arrival) of at least ``ts``
        while waiting and waiting[0][0] <= ts:
            _, _, at, who = heapq.heappop(waiting)
            yield f"user-{who:0{width}d}", {"page": rng.choice(PAGES)}, at
    while waiting:
        _, _, at, who = heapq.heappop(waiting)
        yield f"user-{who:0{width}d}", {"page": rng.choice(PAGES)}, at


def check_output(bootstrap: str, counts: str, pages: str) -> dict[str, int]:
    """Sessions written, written twice and tombstones, read back ``read_committed`` (keys kept
    as hashes: tens of millions of sessions fit)."""
    from kspark.kafka.reader import read_to_end, wait_settled

    wait_settled(bootstrap, [counts, pages])
    out = {"sessions": 0, "written twice": 0, "tombstones": 0}
    for topic in (counts, pages):
        seen: set[int] = set()
        for m in read_to_end(bootstrap, topic):
            if m.value() is None:
                out["tombstones"] += 1
                continue
            key = hash(m.key())
            if key in seen:
                out["written twice"] += 1
            seen.add(key)
        out["sessions"] += len(seen)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=parse_runs, default=parse_runs(DEFAULT_RUNS),
                        help="records:keys:master,... (default: %(default)s)")
    parser.add_argument("--warm-up", type=amount, default=200_000)
    parser.add_argument("--check-up-to", type=amount, default=1_000_000,
                        help="compare runs of at most this many records with the test driver")
    parser.add_argument("--chart", help="write a PNG of the figures here")
    parser.add_argument("--timeout", type=float, default=7200.0)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kspark-growth-")
    results: list[dict[str, Any]] = []
    labels: list[str] = []
    failures: list[str] = []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(__file__)).stdout.strip() or "?"
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        prepare_coordinators(bootstrap)
        now = int(time.time() * 1000) - 60_000
        produce(bootstrap, "warm-up-clicks", stream_clicks(args.warm_up, 10_000, 7, now))
        for i, (records, keys, master, cap) in enumerate(args.runs):
            label = f"{records:,} records, {keys:,} keys, {master}" + (
                f", {cap:,} a micro-batch" if cap else "")
            source, counts, pages = f"clicks-{i}", f"counts-{i}", f"pages-{i}"
            ensure_topics(bootstrap, [TopicSpec(t, PARTITIONS) for t in
                                      (counts, pages, f"{counts}-warm-up", f"{pages}-warm-up")])
            t0 = time.time()
            produce(bootstrap, source, stream_clicks(records, keys, 1, now))
            print(f"{label}: produced in {time.time() - t0:.0f} s", flush=True)
            steal = Steal()
            figures = run_process("kspark", [
                sys.executable, os.path.join(PEERS, "kspark_sessions.py"), "--bootstrap",
                bootstrap, "--input", source, "--counts", counts, "--pages", pages,
                "--warm-up-input", "warm-up-clicks", "--master", master,
                *(["--per-trigger", str(cap)] if cap else [])],
                os.path.join(work, f"run-{i}.log"), args.timeout)
            figures.update(records=records, steal=Steal.text(steal.fraction()),
                           load=load_text(), output=check_output(bootstrap, counts, pages))
            if records <= args.check_up_to:
                ref, _ = reference(list(stream_clicks(records, keys, 1, now)))
                got, _ = read_sessions(bootstrap, counts, pages, windowed_keys=True)
                figures["driver"] = compare(ref, got)
                wrong = {k: v for k, v in figures["driver"].items() if k != "same" and v}
                if wrong:
                    failures.append(f"{label}: differs from the test driver: {wrong}")
            bad = {k: v for k, v in figures["output"].items() if k != "sessions" and v}
            if bad:
                failures.append(f"{label}: {bad}")
            print(f"{label}: {records / figures['elapsed']:,.0f} records/s, "
                  f"{figures['cpu'] / (records / 1e6):.1f} CPU s per million, peak memory "
                  f"{figures['peak_pss'] / 2**20:,.0f} MiB (PSS; RSS "
                  f"{figures['peak_rss'] / 2**20:,.0f}), "
                  f"{figures['steal']}, {figures['load']}; "
                  f"{figures['output']}"
                  + (f"; against the test driver {figures['driver']}" if "driver" in figures
                     else " (not compared with the test driver)"), flush=True)
            results.append(figures)
            labels.append(f"{records / 1e6:g} M rec\n{keys:,} keys\n{master}"
                          + (f"\n{cap / 1e6:g} M a batch" if cap else ""))
    print(f"\nkspark's growth on the sessions job, Kafka to Kafka, commit {commit}, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}:")
    print(f"  {'run':<62} {'records/s':>10} {'CPU s/M':>8} {'PSS MiB':>9}  steal")
    for (records, keys, master, cap), r in zip(args.runs, results):
        run = f"{records:,} records, {keys:,} keys, {master}" + (
            f", {cap:,} a micro-batch" if cap else "")
        print(f"  {run:<62} "
              f"{records / r['elapsed']:>10,.0f} {r['cpu'] / (records / 1e6):>8.1f} "
              f"{r['peak_pss'] / 2**20:>9,.0f}  {r['steal']}")
    if args.chart:
        bars(args.chart, f"kspark, the sessions job, Kafka to Kafka ({time.strftime('%Y-%m-%d')}, "
             f"{commit}, {os.cpu_count()} cores)", labels, [
                 ("thousand records/s", [r["records"] / r["elapsed"] / 1e3 for r in results],
                  "%.1f"),
                 ("peak memory, all processes (PSS, GiB)",
                  [r["peak_pss"] / 2**30 for r in results], "%.2f")])
    for failure in failures:
        print(f"FAILED: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
