"""The sessions job on Quix Streams (a peer for comparison; run by the Quix venv's python).

clicks (key: user id, value: {"page": ...}, record timestamp: event time)
  -> per user, session windows: inactivity gap 10 s, grace 10 s, emitted once at close (.final())
  -> counts topic: {"user", "start", "end", "count"}
  -> pages topic:  {"user", "start", "end", "pages"}  (pages in timestamp order)

One windowed aggregation computes both results (``.agg(count=Count(), pages=Collect("page"))``);
two branches off it write the two topics. ``start``/``end`` follow Kafka Streams' convention
(first and last click timestamp, both inclusive); Quix's own window end is exclusive (last + 1),
so ``end`` here is Quix's end minus 1.

Application.run() runs forever, so the script stops itself at the end of the input available at
start: it reads the input's high watermarks (and the group's committed offsets) before running
and calls ``Application.stop()`` from ``on_message_processed`` once every partition has been
processed up to them (or once ``--records N`` input records have been processed). Quix then
commits its last checkpoint (a transaction commit under exactly-once) and exits. Sessions still
open at that point are not emitted (Quix has no flush of open windows at stop); they stay in the
state store and its changelog topic.

For ``benchmarks/peers.py`` it speaks ``protocol``: an optional warm-up run on other topics first
(``--warm-up-input``: its own app, consumer group ``<group>-warm-up`` and state, outputs to
``<counts>-warm-up`` / ``<pages>-warm-up``), then ``peers: measuring``, the measured run, and
``peers: result {"elapsed", "warm_up_s", "dropped", ...}`` (dropped: late clicks).

``--live`` (``benchmarks/peers_latency.py``): every update of a session emitted
(``.current()``; Quix refuses ``Collect`` there, so the pages are appended by a ``Reduce``), the
input read until SIGTERM; under exactly-once the results are visible at each checkpoint's commit
(``--commit-interval``). ``--live --job counts``: a running count of each user's clicks instead
(a stateful ``apply``), JSON ``{"user", "count"}`` to ``--counts``.

Setup: ``benchmarks/peers/setup.sh`` (a virtual environment of its own with
``requirements-quix.txt``, by default ``~/.cache/kspark/peers/quix``).

Usage:
    ~/.cache/kspark/peers/quix/bin/python quix_sessions.py --bootstrap 127.0.0.1:9092 \
        --input clicks --counts session-counts --pages session-pages --consumer-group g1 \
        [--guarantee exactly-once|at-least-once] [--commit-interval S] [--state-dir DIR] \
        [--records N] [--closing-strategy partition|key] [--processes K] [--warm-up-input TOPIC]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any

import confluent_kafka
import protocol
import quixstreams
from confluent_kafka import Consumer, TopicPartition
from quixstreams import Application
from quixstreams.dataframe.windows import Collect, Count, Reduce
from quixstreams.models import TopicConfig

GAP = timedelta(seconds=10)
GRACE = timedelta(seconds=10)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the Kafka broker")
    p.add_argument("--input", required=True, help="input topic of clicks")
    p.add_argument("--counts", required=True, help="output topic: clicks per session")
    p.add_argument("--pages", required=True, help="output topic: pages per session")
    p.add_argument("--consumer-group", required=True)
    p.add_argument("--guarantee", choices=("exactly-once", "at-least-once"),
                   default="exactly-once")
    p.add_argument("--commit-interval", type=float, default=5.0,
                   help="seconds between checkpoints (Quix default 5.0)")
    p.add_argument("--state-dir", default=None,
                   help="RocksDB state directory (default: a temporary one, removed at exit)")
    p.add_argument("--records", type=int, default=0,
                   help="stop after N input records (default: at the input's end offsets)")
    p.add_argument("--closing-strategy", choices=("partition", "key"), default="partition",
                   help="'partition': stream time per partition, as Kafka Streams (default); "
                        "'key': Quix's default, per-key time")
    p.add_argument("--idle-timeout", type=float, default=30.0,
                   help="safety net: stop after this many seconds without a message")
    p.add_argument("--processes", type=int, default=1,
                   help="app instances in the consumer group (Quix scales out by replicas)")
    p.add_argument("--warm-up-input", help="process this topic first, in the same process")
    p.add_argument("--live", action="store_true",
                   help="a live job: every update of a session emitted (.current()), the input "
                        "read until SIGTERM (benchmarks/peers_latency.py)")
    p.add_argument("--job", choices=("sessions", "counts"), default="sessions",
                   help="with --live: the sessions job, or a running count of each user's "
                        "clicks (stateful apply) to --counts")
    p.add_argument("--loglevel", default="WARNING")
    return p.parse_args(argv)


class Job:
    """One run: an input topic to two output topics, with its consumer group and state."""

    def __init__(self, source: str, counts: str, pages: str, group: str, state_dir: str) -> None:
        self.source, self.counts, self.pages = source, counts, pages
        self.group, self.state_dir = group, state_dir


def input_end_offsets(bootstrap: str, topic: str, group: str) -> tuple[int, dict[int, int]]:
    """(partition count, {partition: last offset to process}) for the records there now.

    Partitions whose committed offset already reaches the high watermark are left out."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        meta = c.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            raise SystemExit(f"input topic {topic!r}: {meta.error}")
        parts = sorted(meta.partitions)
        committed = {tp.partition: tp.offset
                     for tp in c.committed([TopicPartition(topic, p) for p in parts], timeout=30)}
        targets = {}
        for p in parts:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            start = max(low, committed.get(p, -1))
            if high > start:
                targets[p] = high - 1
        return len(parts), targets
    finally:
        c.close()


class Progress:
    """Processed offsets, record and late-drop counts; calls ``stop`` at the end of the input.

    In one process it keeps plain ints; with ``--processes`` the fields are shared arrays written
    by the children and watched by the parent, which then stops them all with SIGTERM."""

    def __init__(self, topic: str, partitions: int, targets: dict[int, int], records: int,
                 offsets: Any = None, counts: Any = None, slot: int = 0) -> None:
        self.topic = topic
        self.targets = targets
        self.records = records
        self.offsets = offsets if offsets is not None else [-1] * partitions
        self.counts = counts if counts is not None else [0, 0]  # [processed, late] per slot
        self.p_i, self.l_i = 2 * slot, 2 * slot + 1
        self.stop: Any = None  # set to Application.stop in single-process mode

    def on_processed(self, topic: str, partition: int, offset: int) -> None:
        self.counts[self.p_i] += 1
        if topic == self.topic and offset > self.offsets[partition]:
            self.offsets[partition] = offset
        if self.stop is not None and self.done():
            self.stop()

    def on_late(self, *_args: Any) -> bool:
        self.counts[self.l_i] += 1
        return False  # count only; don't log a warning per late record

    @property
    def processed(self) -> int:
        return sum(self.counts[0::2])

    @property
    def late(self) -> int:
        return sum(self.counts[1::2])

    def pending(self) -> list[int]:
        return [p for p, t in self.targets.items() if self.offsets[p] < t]

    def done(self) -> bool:
        if self.records:
            return self.processed >= self.records
        return not self.pending()


def to_counts(w: dict, key: str, _ts: int, _headers: object) -> dict:
    return {"user": key, "start": w["start"], "end": w["end"] - 1, "count": w["count"]}


def to_pages(w: dict, key: str, _ts: int, _headers: object) -> dict:
    return {"user": key, "start": w["start"], "end": w["end"] - 1, "pages": w["pages"]}


def running_count(_value: Any, key: str, _ts: int, _headers: object, state: Any) -> dict:
    """``--job counts``: the user's clicks so far, in its state."""
    count = state.get("count", 0) + 1
    state.set("count", count)
    return {"user": key, "count": count}


def build_app(args: argparse.Namespace, job: Job, partitions: int, state_dir: str,
              progress: Progress) -> Application:
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=job.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        commit_interval=args.commit_interval,
        state_dir=state_dir,
        on_message_processed=progress.on_processed,
        loglevel=args.loglevel,
    )
    inp = app.topic(job.source, key_deserializer="str", value_deserializer="json")
    out_config = TopicConfig(num_partitions=partitions, replication_factor=1)  # if missing
    counts = app.topic(job.counts, key_serializer="str", value_serializer="json",
                       config=out_config)
    pages = app.topic(job.pages, key_serializer="str", value_serializer="json",
                      config=out_config)

    if args.live and args.job == "counts":
        app.dataframe(inp).apply(running_count, stateful=True, metadata=True).to_topic(counts)
        return app
    window = app.dataframe(inp).session_window(inactivity_gap_ms=GAP, grace_ms=GRACE,
                                               on_late=progress.on_late)
    if args.live:  # Collect is refused by .current(): the pages appended by a Reduce instead
        sessions = window.agg(count=Count(), pages=Reduce(
            reducer=lambda pages, click: [*pages, click["page"]],
            initializer=lambda click: [click["page"]],
            merger=lambda left, right: left + right)).current(
                closing_strategy=args.closing_strategy)
    else:
        sessions = window.agg(count=Count(), pages=Collect("page")).final(
            closing_strategy=args.closing_strategy)
    # Two branches off one window: Quix copies the window result for the second branch.
    sessions.apply(to_counts, metadata=True).to_topic(counts)
    sessions.apply(to_pages, metadata=True).to_topic(pages)
    return app


def print_config(app: Application, args: argparse.Namespace, state_dir: str) -> None:
    cfg = app.config
    print(f"config: Quix Streams {quixstreams.__version__} (confluent-kafka "
          f"{confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}), "
          f"{args.processes} process(es), {cfg.processing_guarantee}, commit every "
          f"{cfg.commit_interval:g} s, RocksDB state with changelog topics "
          f"({cfg.use_changelog_topics}), closing_strategy={args.closing_strategy}, "
          f"gap {GAP.total_seconds():g} s, grace {GRACE.total_seconds():g} s")
    print(f"  state dir: {state_dir}; consumer: group={cfg.consumer_group} "
          f"auto_offset_reset={cfg.auto_offset_reset} extra={cfg.consumer_extra_config} "
          f"(librdkafka defaults otherwise; Quix adds enable.auto.commit/offset.store=False, "
          f"partition.assignment.strategy=range) poll_timeout={cfg.consumer_poll_timeout}s; "
          f"producer: extra={cfg.producer_extra_config}", flush=True)


def child(args: argparse.Namespace, job: Job, partitions: int, targets: dict[int, int],
          offsets: Any, counts: Any, slot: int, show: bool) -> None:
    """One of ``--processes`` app instances in the same consumer group (Quix's way to scale)."""
    progress = Progress(job.source, partitions, targets, args.records, offsets, counts, slot)
    state_dir = os.path.join(job.state_dir, f"p{slot}")
    app = build_app(args, job, partitions, state_dir, progress)
    if show and slot == 0:
        print_config(app, args, job.state_dir)
    app.run(timeout=args.idle_timeout, collect=False)  # until the parent's SIGTERM


def run_processes(args: argparse.Namespace, job: Job, partitions: int, targets: dict[int, int],
                  progress: Progress, show: bool) -> None:
    ctx = mp.get_context("spawn")
    offsets = ctx.Array("q", progress.offsets, lock=False)
    counts = ctx.Array("q", [0] * (2 * args.processes), lock=False)
    progress.offsets, progress.counts = offsets, counts
    procs = [ctx.Process(target=child, args=(args, job, partitions, targets, offsets, counts, i,
                                             show))
             for i in range(args.processes)]
    for proc in procs:
        proc.start()
    try:
        while not progress.done() and any(proc.is_alive() for proc in procs):
            time.sleep(0.05)
    finally:
        for proc in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)  # Quix stops gracefully: final commit
        for proc in procs:
            proc.join()


def run(args: argparse.Namespace, job: Job, show: bool) -> Progress:
    """Process ``job``'s input up to its end offsets now (or ``--records``) and return."""
    partitions, targets = input_end_offsets(args.bootstrap, job.source, job.group)
    progress = Progress(job.source, partitions, targets, args.records)
    print(f"input {job.source}: {partitions} partitions, to process: "
          f"{f'{args.records} records' if args.records else targets or 'nothing'}", flush=True)
    t0 = time.monotonic()
    if not (targets or args.records):
        pass
    elif args.processes > 1:
        run_processes(args, job, partitions, targets, progress, show)
    else:
        app = build_app(args, job, partitions, job.state_dir, progress)
        if show:
            print_config(app, args, job.state_dir)
        progress.stop = app.stop
        app.run(timeout=args.idle_timeout, collect=False)
    secs = time.monotonic() - t0
    rate = progress.processed / secs if secs else 0.0
    print(f"{job.source}: processed {progress.processed} records in {secs:.1f}s "
          f"(~{rate:,.0f} records/s incl. start-up), late drops {progress.late}, "
          f"unfinished partitions {progress.pending() if not args.records else '-'}", flush=True)
    if not progress.done():
        raise SystemExit(f"{job.source}: stopped before the end of the input")
    return progress


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    own_state = args.state_dir is None
    state_dir = tempfile.mkdtemp(prefix="quix-state-") if own_state else args.state_dir
    try:
        if args.live:
            job = Job(args.input, args.counts, args.pages, args.consumer_group, state_dir)
            partitions = input_end_offsets(args.bootstrap, args.input, args.consumer_group)[0]
            app = build_app(args, job, partitions, state_dir,
                            Progress(args.input, partitions, {}, 0))
            print_config(app, args, state_dir)
            print("config: " + ("a running count per user (stateful apply)" if args.job == "counts"
                                else "sessions emitted on every update (.current())")
                  + ", until SIGTERM", flush=True)
            protocol.live()
            app.run()  # Quix stops on SIGTERM: its last checkpoint committed
            return 0
        warm_up_s = 0.0
        if args.warm_up_input:
            t0 = time.time()
            run(args, Job(args.warm_up_input, f"{args.counts}-warm-up", f"{args.pages}-warm-up",
                          f"{args.consumer_group}-warm-up", os.path.join(state_dir, "warm-up")),
                show=True)
            warm_up_s = time.time() - t0
        started = protocol.measuring()
        progress = run(args, Job(args.input, args.counts, args.pages, args.consumer_group,
                                 os.path.join(state_dir, "run")), show=not args.warm_up_input)
        protocol.result(elapsed=time.time() - started, warm_up_s=warm_up_s,
                        dropped=progress.late, processed=progress.processed)
    finally:
        if own_state:
            shutil.rmtree(state_dir, ignore_errors=True)
    logging.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
