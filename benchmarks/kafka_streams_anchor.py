"""Kafka Streams as the performance anchor: kspark's main job as a Java Kafka Streams application
(``benchmarks/kafka-streams-anchor/``), built once and run as a JVM of its own against the same
embedded Apache Kafka broker. ``benchmarks/kafka_end_to_end.py`` runs it after kspark's run on the
same clicks and prints both side by side; this module only builds and drives the JVM.

Building: ``mvn -q -B package`` of a copy of ``benchmarks/kafka-streams-anchor/`` (a build never
writes into the checkout), on first use, into ``<kspark cache>/kafka-streams-anchor/<hash of its
sources>/`` (the kspark cache is ``$KSPARK_CACHE_DIR``, else ``~/.cache/kspark``), as the oracle
of ``tests/oracle`` is built; a lock file serialises builds across processes.

Running: :class:`KafkaStreamsApp` starts ``java -jar`` with the application's options, reads the
lines it reports (``created``, ``state``, ``dropped``, ``closed``, ``error``: see
``SessionsApp.java``) and stops it by closing its standard input. Its progress is read from
outside, as Kafka's tools would: the offsets of the input topic that its consumer group has
committed. Under exactly-once those are committed in the same transaction as the output records
of everything before them, so once they reach the input's end offsets every output is written and
committed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from kspark.jvm.maven import BuildError, build_jar

SOURCES = Path(__file__).resolve().parent / "kafka-streams-anchor"
JAR_NAME = "kspark-kafka-streams-anchor.jar"
#: the JVM's own defaults (tiered JIT with C2, G1) as a Kafka Streams service would run, with a
#: fixed heap so that it does not grow during the measurement
JVM_OPTIONS = ("-Xms1g", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
#: Kafka Streams' default commit interval under exactly-once
COMMIT_INTERVAL_MS = 100


#: errors of an offset fetch while the group coordinator starts (a fresh broker's first group)
_NOT_YET = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class AnchorError(RuntimeError):
    """The Kafka Streams application could not be built, or failed while it ran."""


def jar_path() -> Path:
    """The application's jar, built with ``mvn`` on first use and cached."""
    try:
        return build_jar(SOURCES, JAR_NAME, "kafka-streams-anchor",
                         announce="building the Kafka Streams application (once; cached)")
    except BuildError as exc:
        raise AnchorError(str(exc)) from exc


def run_main(main_class: str, *args: str) -> list[str]:
    """Run ``kspark.anchor.<main_class>`` with ``args`` in a JVM of its own, to its end; the
    lines it printed."""
    proc = subprocess.run(
        ["java", *JVM_OPTIONS, "-cp", str(jar_path()), f"kspark.anchor.{main_class}", *args],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AnchorError(f"{main_class} exited with code {proc.returncode}:\n{proc.stderr}")
    return proc.stdout.splitlines()


def add_driver_options(parser: Any, store: bool = True) -> None:
    """The options of a test-driver benchmark that runs Kafka Streams' own driver too:
    ``--kafka-streams``, ``--kafka-streams-runs`` and (``store``) ``--kafka-streams-store``."""
    parser.add_argument("--kafka-streams", action="store_true",
                        help="also Kafka Streams' own TopologyTestDriver on the same records")
    parser.add_argument("--kafka-streams-runs", type=int, default=12,
                        help="runs of Kafka Streams' driver in its one JVM, so that its JIT "
                             "levels off before the figure is taken (see levelled())")
    if not store:
        return
    parser.add_argument("--kafka-streams-store", choices=["rocksdb", "in_memory"],
                        default="rocksdb", help="Kafka Streams' DSL store type (its default: "
                        "rocksdb; kspark's stores are in memory)")


def levelled(rates: list[float], tolerance: float = 0.05, window: int = 3
              ) -> tuple[int | None, float]:
    """Where a JVM's run rates level off: the first run (0-based) from which every later run
    is within ``tolerance`` of the median of the last ``window`` runs, and the best rate from
    there on; ``(None, best of all)`` when the last runs are not that close (not levelled)."""
    if len(rates) < window:
        return None, max(rates)
    tail = sorted(rates[-window:])[window // 2]
    start = len(rates)
    while start > 0 and abs(rates[start - 1] - tail) <= tolerance * tail:
        start -= 1
    if len(rates) - start < window:
        return None, max(rates)
    return start, max(rates[start:])


def levelled_text(rates: list[float]) -> tuple[str, float]:
    """A line on where Kafka Streams' runs levelled off, and the figure to compare with."""
    start, rate = levelled(rates)
    if start is None:
        return (f"not levelled off after {len(rates)} runs (the last three more than 5 % "
                f"apart): its best run {rate:,.0f} rec/s", rate)
    return (f"its JIT levelled off from run {start + 1} of {len(rates)} (every later run "
            f"within 5 % of the last three's median): best levelled run {rate:,.0f} rec/s", rate)


def run_test_driver(main_class: str, rows: Iterable[tuple[Any, ...]], *args: str
                    ) -> list[list[str]]:
    """Run ``kspark.anchor.<main_class>``, a benchmark in Kafka Streams' own
    ``TopologyTestDriver``, on ``rows`` (written one a line, tab-separated, to a file it reads
    first) with ``args`` after the file's path; the fields of each ``run ...`` line it prints."""
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        f.writelines("\t".join(map(str, row)) + "\n" for row in rows)
    try:
        lines = run_main(main_class, f.name, *args)
    finally:
        os.remove(f.name)
    return [line.split()[1:] for line in lines if line.startswith("run ")]


class KafkaStreamsApp:
    """The sessions application in a JVM: ``input_topic`` (4 partitions, String keys, JSON
    values) to ``counts_topic`` and ``pages_topic``, which must exist. Its state directory and
    its log (``kafka-streams.log``: the topology, then Kafka's warnings) are in ``workdir``."""

    def __init__(self, bootstrap: str, application_id: str, workdir: str, input_topic: str,
                 counts_topic: str, pages_topic: str, emit_on_close: bool,
                 commit_interval_ms: int = COMMIT_INTERVAL_MS, threads: int = 2,
                 cache_max_bytes: int | None = None,
                 jvm_options: tuple[str, ...] = JVM_OPTIONS, jar: Path | None = None,
                 emit_interval_ms: int | None = None, warm_up_input: str | None = None,
                 job: str = "sessions") -> None:
        self.bootstrap = bootstrap
        self.application_id = application_id
        self.input_topic = input_topic
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "kafka-streams.log")
        self.command = [
            "java", *jvm_options, "-jar", str(jar or jar_path()),
            "--bootstrap", bootstrap, "--application-id", application_id,
            "--input", input_topic, "--counts", counts_topic, "--pages", pages_topic,
            "--emit", "close" if emit_on_close else "update",
            "--state-dir", os.path.join(workdir, "kafka-streams-state"),
            "--commit-interval-ms", str(commit_interval_ms), "--threads", str(threads),
        ]
        if cache_max_bytes is not None:
            self.command += ["--cache-max-bytes", str(cache_max_bytes)]
        if emit_interval_ms is not None:  # else 0: see SessionsApp.java
            self.command += ["--emit-interval-ms", str(emit_interval_ms)]
        if job != "sessions":  # "counts": a running count per user (SessionsApp.java)
            self.command += ["--job", job]
        if warm_up_input is not None:  # run on it first, in the same JVM (its "warmed-up")
            self.command += ["--warm-up-input", warm_up_input]
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._reader: threading.Thread | None = None
        self._changed = threading.Condition()
        #: what the application reported: name -> (epoch seconds or value)
        self.reported: dict[str, float] = {}
        self.states: list[tuple[str, float]] = []
        self.errors: list[str] = []
        self.launched_at: float | None = None
        self._admin: Any = None

    # -- the JVM ---------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> KafkaStreamsApp:
        """Launch the JVM and return once it is about to make its KafkaStreams object."""
        self._log = open(self.log_path, "a")  # noqa: SIM115 (closed in stop)
        self.launched_at = time.time()
        self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_for("created", timeout)
        return self

    @property
    def created_at(self) -> float:
        """When the application made its KafkaStreams object (epoch seconds)."""
        return self.reported["created"]

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            what, _, rest = line.strip().partition(" ")
            with self._changed:
                if what == "error":
                    self.errors.append(rest)
                elif what == "state":
                    state, _, at = rest.partition(" ")
                    self.states.append((state, int(at) / 1000))
                    self.reported.setdefault(state.lower(), int(at) / 1000)
                elif what in ("created", "closed", "warmed-up"):
                    self.reported[what] = int(rest) / 1000
                elif what == "dropped":
                    self.reported[what] = int(rest)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def check(self) -> None:
        """Raise :class:`AnchorError` if the application reported an error or exited."""
        if self.errors:
            raise AnchorError(f"Kafka Streams failed: {self.errors[0]}; log: {self.log_path}\n"
                              f"{self.log_tail()}")
        if self._proc is not None and self._proc.poll() is not None:
            raise AnchorError(f"the Kafka Streams JVM exited with code {self._proc.returncode}; "
                              f"log: {self.log_path}\n{self.log_tail()}")

    def _wait_for(self, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while what not in self.reported:
                self.check()
                if time.monotonic() > deadline:
                    raise AnchorError(f"Kafka Streams did not report {what!r} within {timeout} s")
                self._changed.wait(0.1)

    def log_tail(self, lines: int = 30) -> str:
        if not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def stop(self, timeout: float = 90.0) -> None:
        """Close Kafka Streams (its standard input is closed) and wait for the JVM to exit."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def dropped(self) -> int | None:
        """The tasks' dropped-records-total, reported at stop."""
        value = self.reported.get("dropped")
        return None if value is None else int(value)

    # -- progress, from outside ------------------------------------------------------------------
    def committed(self) -> dict[int, int]:
        """The input offsets the application's consumer group has committed, by partition
        (partitions without a committed offset are missing)."""
        offsets = committed_offsets(self.bootstrap, self.application_id, self._admin_client())
        return {p: o for (t, p), o in (offsets or {}).items() if t == self.input_topic}

    def _admin_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4})
        return self._admin

    def wait_caught_up(self, ends: dict[int, int], timeout: float, poll: float = 0.05) -> float:
        """Wait until the group has committed ``ends`` (partition -> end offset of the input)
        for every partition; return the moment that was first seen (epoch seconds)."""
        deadline = time.monotonic() + timeout
        wanted = {p: e for p, e in ends.items() if e > 0}
        while True:
            self.check()
            committed = self.committed()
            if all(committed.get(p, -1) >= e for p, e in wanted.items()):
                return time.time()
            if time.monotonic() > deadline:
                behind = {p: e - committed.get(p, 0) for p, e in wanted.items()}
                raise AnchorError(f"Kafka Streams did not catch up within {timeout} s "
                                  f"(records behind by partition: {behind})")
            time.sleep(poll)


def committed_offsets(bootstrap: str, group: str, admin: Any = None
                      ) -> dict[tuple[str, int], int] | None:
    """The offsets ``group`` has committed, by (topic, partition); None while the broker's group
    coordinator is still starting (its offsets topic is made on first use)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = admin or AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=10)
    try:
        result = futures[group].result()
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is not None and (error.retriable() or error.code() in _NOT_YET):
            return None
        raise
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []
            if tp.offset >= 0 and not tp.error}


def prepare_coordinators(bootstrap: str, timeout: float = 120.0) -> None:
    """Make a fresh broker's internal topics for transactions and consumer groups now (each is
    made on first use), so that neither engine's measured run pays for them. (The group
    coordinator is asked through a consumer: confluent-kafka 2.16's admin client has crashed
    the process when asked for a group's offsets right after the broker started.)"""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-prepare"})
    producer.init_transactions(timeout)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-prepare",
                         "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.committed([TopicPartition("bench-prepare", 0)], timeout=10)
                return
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                retry = error is not None and (error.retriable() or error.code() in _NOT_YET)
                if not retry or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()
