"""Benchmark: exactly once from Kafka to Kafka across many kills. The sessions app of
``kspark.examples.sessions`` runs in a process of its own while a producer thread adds clicks at
a steady rate; the process is killed with SIGKILL, restarted on its checkpoint in a new process,
killed again... ``--kills`` times. Each kill falls (seeded choices) either at a random moment up
to ``--max-delay`` seconds after the process's first Kafka commit, or (``--after-commit-share``
of them) right after its first, second or third Kafka commit, before Spark records the batch in
its checkpoint: the process kills itself there, and its restart must redo that batch without
writing it again. Then the rest of the input is produced and a last process reads to the end. The
read_committed output is compared with the test driver's on the same records (one driver per
input partition, as the app runs one task per partition).

Prints per kill the moment (seconds since the start, records produced by then) and the last
batch committed to Kafka, then how many redone batches were skipped as committed before, and the
counts: records in, output records expected, got, lost,
duplicated (and any unexpected ones).

    .venv/bin/python benchmarks/kill_restart.py --kills 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from typing import Any

PARTITIONS = 4
OUTPUTS = ("session-counts", "session-pages")
APP_ID = "kill-restart"


def _app(bootstrap: str, checkpoint: str, per_trigger: int) -> Any:
    from kspark import io
    from kspark.examples.sessions import topology
    from kspark.spark import StreamsApp

    topics = {
        "clicks": io.kafka(bootstrap, max_records_per_trigger=per_trigger),
        "session-counts": io.kafka(bootstrap),
        "session-pages": io.kafka(bootstrap),
    }
    return StreamsApp(topology(), APP_ID, topics, checkpoint_dir=checkpoint)


def child(args: argparse.Namespace) -> None:
    """The app's process: runs until killed (``--forever``; SIGTERM ends it as below), or
    processes what is there and stops."""
    import logging

    handler = logging.StreamHandler()  # to the log: which batches a restart skipped
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logging.getLogger("kspark.kafka").addHandler(handler)
    logging.getLogger("kspark.kafka").setLevel(logging.INFO)
    if args.die_after_commits:
        _die_after_commits(args.die_after_commits)
    app = _app(args.bootstrap, args.checkpoint, args.per_trigger)
    finishing = threading.Event()
    # SIGTERM: process what is there and stop (a soak's last run)
    signal.signal(signal.SIGTERM, lambda *_: finishing.set())
    app.start()
    print("started", flush=True)
    if args.forever:
        while not finishing.is_set() and not app.await_termination(1.0):
            pass  # until killed, finished, or the query fails
    app.process_all_available()
    app.stop()
    print("finished", flush=True)


def _die_after_commits(n: int) -> None:
    """SIGKILL this process (and its Spark) right after its ``n``-th Kafka commit, before Spark
    records the batch in its checkpoint."""
    from kspark.kafka.sink import TransactionalWriter

    commit = TransactionalWriter.commit
    done = []

    def committing(self: Any, run: str, batch_id: int) -> int:
        count = commit(self, run, batch_id)
        if count:
            done.append(batch_id)
            if len(done) == n:
                print(f"dying after the commit of batch {batch_id}", file=sys.stderr, flush=True)
                os.killpg(os.getpgid(0), signal.SIGKILL)
        return count

    TransactionalWriter.commit = committing  # type: ignore[method-assign]


class Feeder(threading.Thread):
    """Produces the clicks in order at ``rate`` a second until :meth:`finish` (then at once)."""

    def __init__(self, bootstrap: str, clicks: list[tuple[str, dict, int]], rate: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.clicks, self.rate = bootstrap, clicks, rate
        self.parts: list[int] = []
        self.hurry = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Producer

        from kspark.hashing import kafka_partition

        errors = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err.str())

        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                 "linger.ms": 5})
            started = time.monotonic()
            for i, (user, click, ts) in enumerate(self.clicks):
                if not self.hurry.is_set():
                    pause = started + i / self.rate - time.monotonic()
                    if pause > 0:
                        self.hurry.wait(pause)
                key = user.encode()
                part = kafka_partition(key, PARTITIONS)
                while True:
                    try:
                        producer.produce("clicks", json.dumps(click).encode(), key,
                                         partition=part, timestamp=ts, on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                self.parts.append(part)
            if producer.flush(60) != 0 or errors:
                raise RuntimeError(f"clicks not delivered: {errors[:3] or 'timed out'}")
        except BaseException as exc:
            self.error = exc

    def finish(self) -> list[int]:
        self.hurry.set()
        self.join(300)
        if self.error is not None:
            raise self.error
        return self.parts


def _spawn(args: argparse.Namespace, bootstrap: str, checkpoint: str, log: Any,
           forever: bool, die_after: int = 0) -> subprocess.Popen:
    per_trigger = args.per_trigger if forever else args.final_per_trigger
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--bootstrap", bootstrap,
           "--checkpoint", checkpoint, "--per-trigger", str(per_trigger)]
    if forever:
        cmd.append("--forever")
    if die_after:
        cmd += ["--die-after-commits", str(die_after)]
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log)


def _wait_for_commit(proc: subprocess.Popen, markers: Any, before: int,
                     args: argparse.Namespace, log: str) -> None:
    """Wait until the app in ``proc`` committed a batch after ``before``."""
    deadline = time.monotonic() + args.commit_timeout
    while _last_batch(markers) <= before:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited ({proc.returncode}); see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no batch committed in {args.commit_timeout} s")
        time.sleep(0.1)


def _last_batch(writer: Any) -> int:
    from kspark.kafka import TopicError

    try:
        return int(writer.app_marker()["batch"])
    except TopicError:  # the marker topic is created when the app starts
        return -1


def _expected(clicks: list[tuple[str, dict, int]], parts: list[int]) -> dict[str, Counter]:
    from kspark import serdes
    from kspark.examples.sessions import topology
    from kspark.testing import TopologyTestDriver

    by_partition = defaultdict(list)
    for record, part in zip(clicks, parts):
        by_partition[part].append(record)
    out: dict[str, Counter] = {t: Counter() for t in OUTPUTS}
    for records in by_partition.values():
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in records:
                pipe.pipe_input(user, click, ts)
            for topic, value_serde in (("session-counts", serdes.Long()),
                                       ("session-pages", serdes.Json())):
                reader = driver.create_output_topic(
                    topic, serdes.SessionWindowed(serdes.String()), value_serde)
                out[topic].update(repr((r.key, r.value, r.timestamp))
                                  for r in reader.read_records_to_list())
    return out


def _got(bootstrap: str) -> dict[str, Counter]:
    from kspark import serdes
    from kspark.kafka.reader import read_to_end

    keys = serdes.SessionWindowed(serdes.String())
    values = {"session-counts": serdes.Long(), "session-pages": serdes.Json()}
    return {
        topic: Counter(
            repr((keys.deserialize(m.key()), values[topic].deserialize(m.value()),
                  m.timestamp()[1]))
            for m in read_to_end(bootstrap, topic)  # read_committed
        )
        for topic in OUTPUTS
    }


def main(args: argparse.Namespace) -> int:
    from kspark.examples.sessions import generate_clicks
    from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics
    from kspark.kafka.reader import read_to_end
    from kspark.kafka.sink import TransactionalWriter

    workdir = tempfile.mkdtemp(prefix="kspark-kill-restart-")
    checkpoint = os.path.join(workdir, "checkpoint")
    generated = list(generate_clicks(args.records, users=args.users, seed=args.seed))
    # timestamps up to a day ago: the broker rejects records more than an hour ahead of its
    # clock, and deletes those older than its retention (7 days)
    span = max(ts for _, _, ts in generated)
    base = (int(time.time()) - 86_400) * 1000 - span
    if span > 5 * 86_400_000:
        raise SystemExit(f"the clicks span {span / 86_400_000:.1f} days: give more --users")
    clicks = [(u, c, base + ts) for u, c, ts in generated]
    rng = random.Random(args.seed)
    started = time.monotonic()
    with EmbeddedBroker() as broker, open(os.path.join(workdir, "app.log"), "ab") as log:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, [TopicSpec("clicks", PARTITIONS)])
        markers = TransactionalWriter(bootstrap, APP_ID)
        feeder = Feeder(bootstrap, clicks, args.rate)
        feeder.start()
        print(f"{len(clicks):,} clicks at {args.rate:g}/s; {args.kills} kills; app log "
              f"{log.name}", flush=True)
        try:
            for kill in range(1, args.kills + 1):
                before = _last_batch(markers)
                # a share of the kills falls right after a Kafka commit, before Spark's
                after_commit = rng.random() < args.after_commit_share
                commits = rng.randint(1, 3) if after_commit else 0
                proc = _spawn(args, bootstrap, checkpoint, log, forever=True, die_after=commits)
                spawned = time.monotonic()
                try:
                    if after_commit:
                        if proc.wait(args.commit_timeout) != -signal.SIGKILL:
                            raise RuntimeError(f"the app exited ({proc.returncode}); see "
                                               f"{log.name}")
                        how = f"right after its Kafka commit #{commits}"
                    else:
                        _wait_for_commit(proc, markers, before, args, log.name)
                        delay = rng.uniform(0.0, args.max_delay)
                        time.sleep(delay)
                        how = f"{delay:.1f} s after its first Kafka commit"
                    moment = time.monotonic()
                    last = _last_batch(markers)
                finally:
                    if proc.poll() is None:
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(60)
                print(f"kill {kill:2d}: at {moment - started:6.1f} s, {moment - spawned:4.1f} s "
                      f"after the process started ({how}; {len(feeder.parts):,} clicks "
                      f"produced): last committed batch {last} (it was {before} at the start)",
                      flush=True)
        finally:
            parts = feeder.finish()
        proc = _spawn(args, bootstrap, checkpoint, log, forever=False)
        if proc.wait(args.final_timeout) != 0:
            raise RuntimeError(f"the last run failed ({proc.returncode}); see {log.name}")
        print(f"last run: read to the end; last committed batch {_last_batch(markers)} "
              f"({time.monotonic() - started:.0f} s in all)", flush=True)
        got = _got(bootstrap)
        on_kafka = sum(1 for _ in read_to_end(bootstrap, "clicks"))
    expected = _expected(clicks, parts)
    want = sum(sum(c.values()) for c in expected.values())
    have = sum(sum(c.values()) for c in got.values())
    lost = sum(sum((expected[t] - got[t]).values()) for t in OUTPUTS)
    extra = {t: got[t] - expected[t] for t in OUTPUTS}
    duplicated = sum(n for t in OUTPUTS for r, n in extra[t].items() if r in expected[t])
    unexpected = sum(n for t in OUTPUTS for r, n in extra[t].items() if r not in expected[t])
    with open(os.path.join(workdir, "app.log"), errors="replace") as f:
        skipped = sum("was committed before; skipped" in line for line in f)
    print(f"batches redone after a kill whose output Kafka had committed already (skipped): "
          f"{skipped}")
    print(f"records in: {len(clicks):,} ({on_kafka:,} on the topic); output records expected: "
          f"{want:,}; got: {have:,}; lost: {lost:,}; duplicated: {duplicated:,}; "
          f"unexpected: {unexpected:,}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if lost == duplicated == unexpected == 0 else 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--records", type=int, default=30_000)
    p.add_argument("--rate", type=float, default=20.0, help="clicks produced a second")
    p.add_argument("--users", type=int, default=12)
    p.add_argument("--per-trigger", type=int, default=100, help="max records per micro-batch")
    p.add_argument("--final-per-trigger", type=int, default=2000,
                   help="max records per micro-batch of the last run (which reads to the end)")
    p.add_argument("--max-delay", type=float, default=3.0,
                   help="kill at most this many seconds after the run's first commit")
    p.add_argument("--after-commit-share", type=float, default=0.5,
                   help="share of the kills right after a Kafka commit (the process kills "
                   "itself), the others at a random moment")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--commit-timeout", type=float, default=180.0)
    p.add_argument("--final-timeout", type=float, default=900.0)
    # the app's process
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--forever", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    p.add_argument("--die-after-commits", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.child:
        child(arguments)
    else:
        sys.exit(main(arguments))
