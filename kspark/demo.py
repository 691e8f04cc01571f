"""``kspark demo``: the main job, end to end, on one machine.

It starts the embedded Apache Kafka broker (or uses a given one), produces a generated
clickstream (users with realistic session gaps, some clicks out of order and some late) to a
topic with several partitions, and runs the sessionization app of
:mod:`kspark.examples.sessions` on local Spark from that topic to output topics. While it runs
it shows records in, micro-batches, open and closed sessions and dropped late records; at the
end it prints a summary table and writes a PNG plot of session lengths and events per session.

Closed sessions are read from the output topic ``session-counts`` (each session once, when it
closes); open ones from the changelog topic of the ``session-counts`` store (its live sessions
less the closed ones).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

APP_ID = "kspark-demo"
INPUT, COUNTS, PAGES = "clicks", "session-counts", "session-pages"
#: both session aggregations of the topology drop each late click
AGGREGATIONS = 2


@dataclass
class DemoResult:
    """What a demo run measured."""

    produced: int = 0
    #: timestamps are the generator's plus this (midnight UTC of the day before the run)
    base_ms: int = 0
    processed: int = 0
    batches: int = 0
    late_dropped: int = 0
    out_of_order: int = 0
    open_sessions: int = 0
    #: closed sessions: (user, start ms, end ms, events)
    sessions: list[tuple[str, int, int, int]] = field(default_factory=list)
    seconds: float = 0.0
    #: from the start until the query runs (broker, Spark, the first fetch of jars)
    startup_seconds: float = 0.0
    #: producing the clicks (while the query already processes them)
    producing_seconds: float = 0.0
    #: in micro-batches: computing, writing, committing
    busy_seconds: float = 0.0
    plot: str = ""


class _Progress:
    """Shared counters of the producer thread and the output tail."""

    def __init__(self) -> None:
        self.produced = 0
        self.producing_done = False
        #: sessions (``Windowed`` keys) closed, and stored in the store (open or just closed)
        self.closed: set[Any] = set()
        self.live: set[Any] = set()
        self.lock = threading.Lock()

    @property
    def open_sessions(self) -> int:
        with self.lock:
            return len(self.live - self.closed)


def _produce(bootstrap: str, clicks: list[tuple[str, dict, int]], partitions: int,
             progress: _Progress) -> None:
    from confluent_kafka import Producer

    from kspark.hashing import kafka_partition

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20, "queue.buffering.max.messages": 500_000})
    for i, (user, click, ts) in enumerate(clicks, 1):
        key = user.encode()
        while True:
            try:
                producer.produce(INPUT, json.dumps(click).encode(), key, timestamp=ts,
                                 partition=kafka_partition(key, partitions))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
            progress.produced = i
    if producer.flush(120):
        raise RuntimeError("the demo producer could not deliver every click")
    progress.produced = len(clicks)
    progress.producing_done = True


class _Sessions:
    """Decodes session keys of the output topic and of the store's changelog alike."""

    def __init__(self, topology: Any) -> None:
        from kspark.examples.sessions import COUNTS_STORE
        from kspark.serdes import SessionWindowed, String
        from kspark.state.internals.changelog import ChangelogCodec

        self.output = SessionWindowed(String())
        self.changelog = ChangelogCodec.for_builder(topology.store_builders[COUNTS_STORE])

    def closed(self, key: bytes) -> Any:
        return self.output.deserialize(key)

    def stored(self, key: bytes) -> Any:
        return self.changelog.decode_key(key)


def _tail(bootstrap: str, changelog: str, keys: _Sessions, progress: _Progress,
          stop: threading.Event) -> None:
    """Follow the closed sessions (output) and the store's changelog (live sessions)."""
    from confluent_kafka import Consumer, TopicPartition

    from kspark.kafka.reader import consumer_config

    consumer = Consumer(consumer_config(bootstrap, {"enable.partition.eof": False,
                                                    "fetch.wait.max.ms": 200}))
    metadata = consumer.list_topics(timeout=10).topics
    consumer.assign([TopicPartition(t, p, -2) for t in (COUNTS, changelog)
                     for p in metadata[t].partitions])
    try:
        while not stop.is_set():
            for m in consumer.consume(10_000, 0.2):
                key = m.key()
                if m.error() or key is None:
                    continue
                with progress.lock:
                    if m.topic() == COUNTS:
                        progress.closed.add(keys.closed(key))
                    elif m.value() is None:
                        progress.live.discard(keys.stored(key))
                    else:
                        progress.live.add(keys.stored(key))
    finally:
        consumer.close()


def _view(result: DemoResult, progress: _Progress, app: Any, started: float) -> Group:
    metrics = app.metrics() if app is not None else {}
    processed = metrics.get("process-total", 0)
    elapsed = time.time() - started
    table = Table(title="kspark demo: sessionizing clicks, Kafka -> Spark -> Kafka",
                  show_header=False, min_width=60)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("clicks produced", f"{progress.produced:,} / {result.produced:,}")
    table.add_row("records in (processed)", f"{processed:,}")
    table.add_row("micro-batches", f"{metrics.get('batches', 0):,}")
    table.add_row("sessions open", f"{progress.open_sessions:,}")
    table.add_row("sessions closed", f"{len(progress.closed):,}")
    late = metrics.get("dropped-records-expired-window", 0) // AGGREGATIONS
    table.add_row("late clicks dropped", f"{late:,}")
    table.add_row("elapsed", f"{elapsed:,.0f} s")
    bar = ProgressBar(total=max(result.produced, 1), completed=processed, width=60)
    return Group(table, bar)


def run_demo(
    records: int = 100_000,
    partitions: int = 4,
    users: int | None = None,
    out: str = "kspark-demo.png",
    master: str = "local[2]",
    console: Console | None = None,
    seed: int = 7,
    spark: Any = None,
    bootstrap: str | None = None,
    broker_log: str | None = None,
) -> DemoResult:
    """Run the demo end to end and return what it measured (see the module's documentation).
    It starts (and stops) a local Spark session on ``master`` unless given ``spark``, and the
    embedded Apache Kafka broker (logging to ``broker_log``) unless given ``bootstrap``."""
    import contextlib

    from kspark import io
    from kspark.examples.sessions import COUNTS_STORE, generate_clicks, topology
    from kspark.kafka import KAFKA_VERSION, EmbeddedBroker, TopicSpec, ensure_topics
    from kspark.spark import StreamsApp
    from kspark.spark.session import local_spark
    from kspark.state.internals.changelog import changelog_topic

    console = console or Console()
    users = users or max(200, records // 200)
    generated = list(generate_clicks(records, users=users, seed=seed))
    # the clicks end about now (on a whole minute): a windowed store's changelog topic keeps
    # records for the store's retention plus a day, by their timestamps, as in Kafka Streams
    span = max((ts for _, _, ts in generated), default=0) + 1
    base = (int(time.time() * 1000) - span) // 60_000 * 60_000
    clicks = [(u, c, base + ts) for u, c, ts in generated]
    result = DemoResult(produced=len(clicks), base_ms=base, out_of_order=_out_of_order(clicks))
    changelog = changelog_topic(APP_ID, COUNTS_STORE)
    workdir = tempfile.mkdtemp(prefix="kspark-demo-")
    progress, stop = _Progress(), threading.Event()
    started = time.time()
    app: Any = None
    with contextlib.ExitStack() as stack:
        if bootstrap is None:
            log_path = broker_log or os.path.join(workdir, "broker.log")
            broker = stack.enter_context(EmbeddedBroker(log_path=log_path))
            bootstrap = broker.bootstrap_servers
            console.print(f"Apache Kafka {KAFKA_VERSION} (embedded, one KRaft node) on "
                          f"{bootstrap}; its log: {log_path}", highlight=False)
        console.print(f"producing {len(clicks):,} clicks of {users:,} users to topic {INPUT!r} "
                      f"({partitions} partitions) on {bootstrap}", highlight=False)
        ensure_topics(bootstrap, [TopicSpec(INPUT, partitions)])
        producer = threading.Thread(target=_produce, name="demo-producer", daemon=True,
                                    args=(bootstrap, clicks, partitions, progress))
        producer.start()
        producing_started = time.time()
        console.print(f"starting Spark ({master}) and the sessions app ...")
        own_spark = spark is None
        spark = local_spark(master) if own_spark else spark
        try:
            sessions = topology()
            keys = _Sessions(sessions)
            app = StreamsApp(
                sessions,
                APP_ID,
                {
                    INPUT: io.kafka(bootstrap, max_records_per_trigger=max(10_000, records // 4)),
                    COUNTS: io.kafka(bootstrap),
                    PAGES: io.kafka(bootstrap),
                    changelog: io.kafka(bootstrap),
                },
                spark=spark,
                checkpoint_dir=os.path.join(workdir, "checkpoint"),
            )
            app.start()
            result.startup_seconds = time.time() - started
            tail = threading.Thread(target=_tail, name="demo-tail", daemon=True,
                                    args=(bootstrap, changelog, keys, progress, stop))
            tail.start()
            with Live(_view(result, progress, app, started), console=console,
                      refresh_per_second=4) as live:
                while producer.is_alive():
                    live.update(_view(result, progress, app, started))
                    producer.join(0.25)
                result.producing_seconds = time.time() - producing_started
                errors: list[BaseException] = []
                runner = threading.Thread(target=_catching(app.process_all_available, errors),
                                          daemon=True)
                runner.start()
                while runner.is_alive():
                    live.update(_view(result, progress, app, started))
                    runner.join(0.25)
                if errors:
                    raise errors[0]
                live.update(_view(result, progress, app, started))
            stop.set()
            tail.join(10)
            metrics = app.metrics()
            result.busy_seconds = app.metrics_report().busy_seconds
            _final(bootstrap, changelog, keys, result)
        finally:
            stop.set()
            if app is not None:
                app.stop()
            if own_spark:
                spark.stop()
    result.processed = metrics.get("process-total", 0)
    result.batches = metrics.get("batches", 0)
    result.late_dropped = metrics.get("dropped-records-expired-window", 0) // AGGREGATIONS
    result.seconds = time.time() - started
    shutil.rmtree(workdir, ignore_errors=True)
    try:
        result.plot = _plot(result, out)
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        result.plot = ""
    console.print()
    console.print(summary_table(result))
    if result.plot:
        console.print(f"plot of session lengths and events per session: {result.plot}")
    else:
        console.print("no plot: matplotlib is not installed (pip install 'kspark[plot]')")
    return result


def _catching(fn: Any, errors: list[BaseException]) -> Any:
    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    return run


def _out_of_order(clicks: list[tuple[str, dict, int]]) -> int:
    """Clicks older than one before them of the same user (arrival order)."""
    latest: dict[str, int] = {}
    count = 0
    for user, _, ts in clicks:
        if ts < latest.get(user, ts):
            count += 1
        latest[user] = max(ts, latest.get(user, ts))
    return count


def _final(bootstrap: str, changelog: str, keys: _Sessions, result: DemoResult) -> None:
    """Closed sessions from the output topic; open ones from the changelog."""
    from kspark.kafka.reader import read_to_end
    from kspark.serdes import Long

    counts = Long()
    closed = set()
    for m in read_to_end(bootstrap, COUNTS):
        windowed = keys.closed(m.key())
        closed.add(windowed)
        result.sessions.append((windowed.key, windowed.window.start, windowed.window.end,
                                counts.deserialize(m.value())))
    live: set[Any] = set()
    for m in read_to_end(bootstrap, changelog):
        (live.add if m.value() is not None else live.discard)(keys.stored(m.key()))
    result.open_sessions = len(live - closed)


def summary_table(result: DemoResult) -> Table:
    lengths = [(end - start) / 1000 for _, start, end, _ in result.sessions]
    events = [n for *_, n in result.sessions]
    table = Table(title="Summary")
    table.add_column("")
    table.add_column("value", justify="right")
    rate = result.processed / result.seconds if result.seconds else 0.0
    rows = [
        ("clicks produced", f"{result.produced:,}"),
        ("records processed", f"{result.processed:,}"),
        ("micro-batches", f"{result.batches:,}"),
        ("clicks out of order (accepted)", f"{result.out_of_order:,}"),
        ("late clicks dropped", f"{result.late_dropped:,}"),
        ("sessions closed", f"{len(result.sessions):,}"),
        ("sessions still open (awaiting gap + grace)", f"{result.open_sessions:,}"),
    ]
    if result.sessions:
        rows += [
            ("events per session: mean / median / max",
             f"{statistics.fmean(events):.1f} / {statistics.median(events):g} / {max(events)}"),
            ("session length (s): mean / median / max",
             f"{statistics.fmean(lengths):.1f} / {statistics.median(lengths):.1f} / "
             f"{max(lengths):.1f}"),
        ]
    busy = result.busy_seconds
    rows += [
        ("start-up: broker, Spark, jars, query", f"{result.startup_seconds:.1f} s"),
        ("producing the clicks (processed meanwhile)", f"{result.producing_seconds:.1f} s"),
        ("processing: time in micro-batches, records/s",
         f"{busy:.1f} s, {result.processed / busy if busy else 0.0:,.0f}"),
        ("wall time, records/s overall", f"{result.seconds:.0f} s, {rate:,.0f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _plot(result: DemoResult, out: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [(end - start) / 1000 for _, start, end, _ in result.sessions]
    events = [n for *_, n in result.sessions]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.hist(lengths or [0], bins=50, color="#3b6ea8")
    left.set_xlabel("session length (s)")
    left.set_ylabel("sessions")
    left.set_title("Session length")
    right.hist(events or [0], bins=range(1, max(events or [1]) + 2), color="#d9822b")
    right.set_xlabel("events per session")
    right.set_title("Events per session")
    fig.suptitle(f"kspark demo: {len(result.sessions):,} closed sessions from "
                 f"{result.processed:,} clicks (gap 10 s, grace 10 s)")
    fig.tight_layout()
    path = os.path.abspath(out)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
