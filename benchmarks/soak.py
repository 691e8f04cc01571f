"""Soak: the main job (the sessions app, Kafka to Kafka, exactly once) at a steady rate for
``--minutes``, its process killed with SIGKILL every ``--kill-every`` minutes and restarted on its
checkpoint. Every ``--sample`` seconds it measures the resident memory of the app's driver
(Python), its JVM and its Python workers, the size of the checkpoint directory and of the state
in it, and the output delay: when the consumer of ``session-counts`` (read_committed) gets a
session, minus the moment the session could close (its end + gap + grace, on the clicks' wall
clock timestamps), p50 and p99 per sample. At the end the rest of the input is processed and the
output compared with the test driver's on the same clicks (lost, duplicated).

Prints each sample as a row, then each series' first and last figures (after ``--warm-up``
seconds) and writes a PNG of the series (``--png``, with the ``plot`` extra). Exits non-zero if a
record was lost or duplicated, or if memory, the sizes or the delay grew: the largest value of
the last third of the run (for the delay p99, its median) above ``--growth`` times that of the
first third (after ``--warm-up``), plus a small allowance for the smallest figures.

    .venv/bin/python benchmarks/soak.py --minutes 30 --kill-every 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

from kill_restart import OUTPUTS, PARTITIONS, _expected, _got
from machine import Steal, load_text

from kspark.examples.sessions import GAP_MS, GRACE_MS

APP_ID = "kill-restart"  # the app of kill_restart.py's child process
SERIES = ("driver MB", "JVM MB", "workers MB", "checkpoint MB", "state MB", "delay p50 s",
          "delay p99 s")
#: growth allowed over these absolute amounts, for figures too small to compare by ratio
ALLOWANCE = {"driver MB": 50, "JVM MB": 150, "workers MB": 100, "checkpoint MB": 5,
             "state MB": 5, "delay p99 s": 5}


class LiveClicks(threading.Thread):
    """Clicks at ``rate`` a second with wall-clock timestamps, users drawn from ``users`` (each
    clicks every ``users / rate`` seconds on average): every session closes, state stays
    bounded. Keeps every click and its partition for the final comparison."""

    def __init__(self, bootstrap: str, rate: float, users: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.rate, self.users = bootstrap, rate, users
        self.rng = random.Random(seed)
        self.clicks: list[tuple[str, dict, int]] = []
        self.parts: list[int] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Producer

        from kspark.examples.sessions import PAGES
        from kspark.hashing import kafka_partition

        try:
            producer = Producer({"bootstrap.servers": self.bootstrap,
                                 "enable.idempotence": True, "linger.ms": 5})
            started, i = time.monotonic(), 0
            while not self.stopping.is_set():
                pause = started + i / self.rate - time.monotonic()
                if pause > 0:
                    self.stopping.wait(pause)
                user = f"user-{self.rng.randrange(self.users):05d}"
                click = {"page": self.rng.choice(PAGES)}
                ts = int(time.time() * 1000)
                part = kafka_partition(user.encode(), PARTITIONS)
                producer.produce("clicks", json.dumps(click).encode(), user.encode(),
                                 partition=part, timestamp=ts)
                producer.poll(0)
                self.clicks.append((user, click, ts))
                self.parts.append(part)
                i += 1
            if producer.flush(60) != 0:
                raise RuntimeError("clicks not delivered")
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        self.stopping.set()
        self.join(120)
        if self.error is not None:
            raise self.error


class OutputDelays(threading.Thread):
    """Reads ``session-counts`` (read_committed) as it comes; per record, the seconds from the
    moment its session could close to its arrival here."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.delays: list[float] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        from kspark import serdes

        keys = serdes.SessionWindowed(serdes.String())
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-delays",
                             "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["session-counts"])
        while not self.stopping.is_set():
            for m in consumer.consume(500, 0.5):
                if m.error() is not None or m.value() is None:
                    continue
                window = keys.deserialize(m.key()).window
                closable = (window.end + GAP_MS + GRACE_MS) / 1000
                with self.lock:
                    self.delays.append(time.time() - closable)
        consumer.close()

    def take(self) -> list[float]:
        with self.lock:
            taken, self.delays = self.delays, []
        return taken


def _tree(root: int) -> list[int]:
    """``root`` and all its descendants (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _rss_mb(pid: int) -> tuple[float, str]:
    """A process's resident memory in MB and its command name."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields.get("VmRSS", "0 kB").split()[0]) / 1024, fields["Name"].strip()
    except (OSError, KeyError, ValueError):
        return 0.0, ""


def memory(root: int) -> tuple[float, float, float]:
    """Resident MB of the app's driver process, its JVMs and its other Python processes (the
    Python workers and their daemon)."""
    driver, jvm, workers = _rss_mb(root)[0], 0.0, 0.0
    for pid in _tree(root)[1:]:
        rss, name = _rss_mb(pid)
        if name == "java":
            jvm += rss
        elif name.startswith("python"):
            workers += rss
    return driver, jvm, workers


def size_mb(path: str) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += os.path.getsize(os.path.join(root, name))
    return total / 1e6


def _spawn(bootstrap: str, checkpoint: str, log: Any, per_trigger: int,
           forever: bool) -> subprocess.Popen:
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, os.path.join(here, "kill_restart.py"), "--child", "--bootstrap",
           bootstrap, "--checkpoint", checkpoint, "--per-trigger", str(per_trigger)]
    if forever:
        cmd.append("--forever")
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def grown(rows: list[dict[str, float]], warm_up: float, factor: float) -> list[str]:
    """The series whose largest value in the last third of the run (after ``warm_up``
    seconds) exceeds ``factor`` times that of the first third plus its allowance."""
    kept = [r for r in rows if r["t"] >= warm_up]
    third = max(1, len(kept) // 3)
    if len(kept) < 3:
        return []
    problems = []
    for name, allowance in ALLOWANCE.items():
        # memory and sizes: the peaks; the delay: the typical p99 (a restart's own spike aside)
        pick = _median if name == "delay p99 s" else max
        first = pick([r[name] for r in kept[:third]])
        last = pick([r[name] for r in kept[-third:]])
        if last > factor * first + allowance:
            problems.append(f"{name}: {first:.1f} -> {last:.1f}")
    return problems


def _median(values: list[float]) -> float:
    known = [v for v in values if v == v]  # not NaN (a sample without output)
    return statistics.median(known) if known else 0.0


def plot(rows: list[dict[str, float]], kills: list[float], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    t = [r["t"] / 60 for r in rows]
    for name in SERIES[:3]:
        axes[0].plot(t, [r[name] for r in rows], label=name)
    for name in SERIES[3:5]:
        axes[1].plot(t, [r[name] for r in rows], label=name)
    for name in SERIES[5:]:
        axes[2].plot(t, [r[name] for r in rows], label=name)
    titles = ("resident memory, MB", "checkpoint and state, MB",
              "output delay after a session can close, s")
    for ax, title in zip(axes, titles):
        ax.set_title(title)
        ax.legend(loc="upper left")
        for k in kills:
            ax.axvline(k / 60, color="grey", linestyle=":", linewidth=1)
    axes[2].set_xlabel("minutes (dotted: a SIGKILL of the app)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(args: argparse.Namespace) -> int:
    from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics

    workdir = tempfile.mkdtemp(prefix="kspark-soak-")
    checkpoint = os.path.join(workdir, "checkpoint")
    steal = Steal()
    rows: list[dict[str, float]] = []
    kills: list[float] = []
    with EmbeddedBroker() as broker, open(os.path.join(workdir, "app.log"), "ab") as log:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
        print(f"soak: {args.minutes:g} min, clicks at {args.rate:g}/s over {args.users:,} "
              f"users, a SIGKILL every {args.kill_every:g} min, a sample every {args.sample:g} "
              f"s; micro-batches of up to {args.per_trigger:,} records; app log {log.name}",
              flush=True)
        feeder, delays = LiveClicks(bootstrap, args.rate, args.users, args.seed), \
            OutputDelays(bootstrap)
        proc = _spawn(bootstrap, checkpoint, log, args.per_trigger, forever=True)
        started = time.monotonic()
        feeder.start()
        delays.start()
        header = f"{'t, s':>6} " + " ".join(f"{n:>13}" for n in SERIES) + f" {'clicks':>9}"
        print(header, flush=True)
        next_kill = started + args.kill_every * 60
        try:
            while time.monotonic() - started < args.minutes * 60:
                time.sleep(args.sample)
                if proc.poll() is not None:
                    raise RuntimeError(f"the app exited ({proc.returncode}); see {log.name}")
                now = time.monotonic()
                driver, jvm, workers = memory(proc.pid)
                taken = delays.take()
                row = {"t": now - started, "driver MB": driver, "JVM MB": jvm,
                       "workers MB": workers, "checkpoint MB": size_mb(checkpoint),
                       "state MB": size_mb(os.path.join(checkpoint, "query", "state")),
                       "delay p50 s": statistics.median(taken) if taken else float("nan"),
                       "delay p99 s": _percentile(taken, 0.99)}
                rows.append(row)
                print(f"{row['t']:6.0f} " + " ".join(f"{row[n]:13.1f}" for n in SERIES)
                      + f" {len(feeder.clicks):9,}", flush=True)
                if now >= next_kill and now - started < args.minutes * 60 - args.sample:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(60)
                    kills.append(now - started)
                    print(f"{now - started:6.0f} SIGKILL; restarting on the checkpoint",
                          flush=True)
                    proc = _spawn(bootstrap, checkpoint, log, args.per_trigger, forever=True)
                    next_kill = now + args.kill_every * 60
            feeder.finish()
            proc.send_signal(signal.SIGTERM)  # the running app reads to the end and stops
            if proc.wait(args.final_timeout) != 0:
                raise RuntimeError(f"the last run failed ({proc.returncode}); see {log.name}")
        finally:
            feeder.finish()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
            delays.stopping.set()
        got = _got(bootstrap)
    expected = _expected(feeder.clicks, feeder.parts)
    lost = sum(sum((expected[t] - got[t]).values()) for t in OUTPUTS)
    extra: dict[str, Counter] = {t: got[t] - expected[t] for t in OUTPUTS}
    duplicated = sum(sum(c.values()) for c in extra.values())
    print(f"\nCPU {Steal.text(steal.fraction())}, {load_text()}")
    kept = [r for r in rows if r["t"] >= args.warm_up]
    if kept:
        print(f"after the {args.warm_up:g} s warm-up, first and last sample "
              f"({len(kills)} kills):")
        for name in SERIES:
            print(f"  {name:14} {kept[0][name]:10.1f} -> {kept[-1][name]:10.1f}  "
                  f"(max {max(r[name] for r in kept):.1f})")
    want = sum(sum(c.values()) for c in expected.values())
    print(f"clicks: {len(feeder.clicks):,}; output records expected: {want:,}; lost: {lost:,}; "
          f"duplicated or unexpected: {duplicated:,}")
    problems = grown(rows, args.warm_up, args.growth)
    for problem in problems:
        print(f"GREW: {problem}")
    if args.png and rows:
        try:
            plot(rows, kills, args.png)
            print(f"plot: {args.png}")
        except ImportError:
            print("no plot: matplotlib is missing (the plot extra)")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if lost == duplicated == 0 and not problems else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--kill-every", type=float, default=5.0, help="minutes between kills")
    p.add_argument("--rate", type=float, default=200.0, help="clicks produced a second")
    p.add_argument("--users", type=int, default=6_000)
    p.add_argument("--per-trigger", type=int, default=2_000, help="max records per micro-batch")
    p.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--warm-up", type=float, default=60.0, help="seconds left out of the checks")
    p.add_argument("--growth", type=float, default=1.5,
                   help="largest growth of a series (last third over first third) allowed")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--png", default="soak.png")
    p.add_argument("--final-timeout", type=float, default=900.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
