"""``benchmarks/peers.py latency``: produce-to-output latency on every engine of
``benchmarks/peers.py``, one engine after the other against one embedded Apache Kafka broker.

Two jobs (``--job``, both by default), a table for each job and rate:

- ``sessions``: the sessions job (a session count and the pages of each session, gap and grace
  10 s), emitting every update of a session where the engine can;
- ``counts``: a running count of each user's clicks, written at every update: a plain
  aggregation every engine emits per record, so the same question has an answer on every
  engine (two of them cannot emit a session before it closes; see below).

For each job, each rate (``--rate``, default 5000 records/s; ``half`` is 50 % of each engine's own
throughput on the sessions job: the figure given by ``--throughput engine=records/s,...``, and
for an engine without one, that of a short ``peers.py`` throughput run made first,
``--half-records`` clicks) and each engine in turn:

1. the engine starts as a LIVE job of its own (its script's ``--live --job``; Kafka Streams: the
   anchor app emitting on update) reading an input topic of its own from its start and writing
   output topics of its own, at its configuration for the freshest output (printed);
2. a producer process (neither the engine's nor the reader's) sends clicks at the steady rate,
   each with the wall-clock time of its production as its timestamp (random users of
   ``--users``, a random page);
3. the reader (this process) reads the counts topic ``read_committed`` from its start and notes
   when each record arrives;
4. once the engine's first output has arrived, the next ``--warm-up`` seconds are left out
   (JIT, Python workers, the first micro-batches, the stores); the clicks of the following
   ``--seconds`` are measured; clicks go on at the same rate (never measured) until every
   user's last measured click is answered or ``--drain`` seconds have passed.

A click's latency: from its production until the reader receives the first record covering it
(``sessions``: a record of the user's session whose first and last click's timestamps enclose
the click's; ``counts``: a count of the user's clicks at or above the click's ordinal). Reported
per engine: median, p95, p99, max, the clicks measured and those without output, how long after
the measured input the engine had answered them all, the CPU steal and the load, the engine's
configuration; with ``--chart``, a PNG of the latency distributions (one panel per table).

What each engine emits, and when a reader sees it (the same clicks and the same question, not
the same semantics; nothing is hidden or tuned away):

- kspark emits updates through its caches, flushed at each micro-batch's commit; micro-batches
  run back to back; the Kafka transaction commits with the micro-batch (exactly once). Its
  latency is about a micro-batch plus the wait for the next one to start.
- Kafka Streams emits updates through its record cache, flushed at each commit; under
  exactly-once a commit is also when its transaction makes them visible: the commit interval
  (100 ms at its defaults, 1 s and 30 s tuned for throughput) bounds its latency from below.
- Quix Streams' session window emits every update (``.current()``; the counts job: a stateful
  ``apply``); under exactly-once its records are visible at each checkpoint's commit, here every
  ``--quix-commit`` seconds (0.1 s, Kafka Streams' exactly-once default; Quix's own is 5 s).
- Spark's native ``session_window`` cannot emit updates: Spark 4 refuses update output mode for
  session windows (``STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION``); in append mode a session is
  written once, when the watermark (newest timestamp - grace, over all partitions, moved once a
  micro-batch) passes its end (last click + gap). The counts job: ``groupBy(user).count()`` in
  update mode. Micro-batches back to back; Spark's Kafka sink writes at least once (no
  transactions): a reader sees a record as soon as it is written.
- Flink's SQL ``SESSION`` window emits a session once, when the watermark (newest timestamp -
  grace, the minimum over the partitions, every 200 ms) passes its end. The counts job:
  ``COUNT(*) GROUP BY user`` to an upsert-kafka sink. Its exactly-once Kafka sinks make output
  visible at each checkpoint, here every ``--flink-checkpoint-ms`` (200 ms; its default is none).

So on the sessions job Spark's and Flink's latency includes the gap (10 s), the grace (10 s) and
the time until the user's session closes: a user clicking more often than the gap keeps one
session open, and none of its clicks is answered while it does (10 k users at 5 k clicks/s
click every 2 s on average). Their clicks without output are reported, and do not fail the run.

The run exits non-zero when an engine fails to start or dies, when an engine that emits
updates leaves most measured clicks without output (it could not keep up with the rate), or
when the producer falls more than 10 % short of the rate.

    .venv/bin/python benchmarks/peers.py latency --rate 5000,half --seconds 60 --chart lat.png
    .venv/bin/python benchmarks/peers.py latency --engines kspark,spark --rate 1000 --seconds 15
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from kafka_job import PARTITIONS, side_by_side
from kafka_streams_anchor import KafkaStreamsApp, prepare_coordinators
from machine import Steal, load_text
from peers import KSTREAMS, LABELS, PEERS, add_engine_options, spark_command
from steady_clicks import Outputs, input_clicks, latencies, produce_steady

from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics

LIVE = "peers: live"
ENGINES = ("kspark", "kstreams", "kstreams-1s", "kstreams-30s", "spark", "flink", "quix")
DEFAULT = "kspark,kstreams,kstreams-1s,spark,flink,quix"
#: engines whose sessions job emits a session only when it closes
AT_CLOSE = {"spark", "flink"}


# -- the engines ----------------------------------------------------------------------------
class Engine:
    """One engine's live job, started and stopped."""

    def __init__(self, engine: str, job: str, args: argparse.Namespace, bootstrap: str,
                 tag: str, work: str) -> None:
        self.engine, self.job, self.args, self.bootstrap = engine, job, args, bootstrap
        self.work = work
        self.app_id = f"lat{tag}-{job}-{engine}"
        self.topic, self.counts, self.pages = (f"{self.app_id}-{what}"
                                               for what in ("clicks", "counts", "pages"))
        self.config: list[str] = []
        self.log = os.path.join(work, f"{self.app_id}.log")
        self.proc: subprocess.Popen[str] | None = None
        self.app: KafkaStreamsApp | None = None
        self.live = threading.Event()

    def command(self) -> list[str] | None:
        a = self.args
        common = ["--bootstrap", self.bootstrap, "--input", self.topic, "--counts",
                  self.counts, "--pages", self.pages, "--live", "--job", self.job]
        if self.engine in ("kspark", "spark"):
            return spark_command(self.engine, a, common)
        python = a.flink_python if self.engine == "flink" else a.quix_python
        if not os.path.exists(python):
            return None
        if self.engine == "flink":
            return [python, os.path.join(PEERS, "flink_sessions.py"), *common, "--parallelism",
                    str(a.parallelism), "--jar", a.flink_jar, "--pages-order", "arrival",
                    "--checkpoint-ms", str(a.flink_checkpoint_ms), "--group-id", self.app_id]
        return [python, os.path.join(PEERS, "quix_sessions.py"), *common, "--consumer-group",
                self.app_id, "--commit-interval", str(a.quix_commit), "--state-dir",
                os.path.join(self.work, f"{self.app_id}-state")]

    def start(self) -> bool:
        """Start the job (False: the engine's interpreter is missing)."""
        ensure_topics(self.bootstrap, [TopicSpec(t, PARTITIONS)
                                       for t in (self.topic, self.counts, self.pages)])
        if self.engine in KSTREAMS:
            commit_ms, cache, _ = KSTREAMS[self.engine]
            self.app = KafkaStreamsApp(self.bootstrap, self.app_id, os.path.join(
                self.work, self.app_id), self.topic, self.counts, self.pages, False,
                commit_interval_ms=commit_ms, threads=2, cache_max_bytes=cache, job=self.job)
            os.makedirs(self.app.workdir, exist_ok=True)
            self.config.append(
                "Kafka Streams 4.3, exactly_once_v2, 2 stream threads, RocksDB, "
                + ("a running count per user" if self.job == "counts" else "sessions")
                + " emitted on update through the record cache "
                f"({'10 MB, default' if cache is None else f'{cache >> 20} MB'}), commit "
                f"every {commit_ms} ms, JVM -Xmx1g")
            self.app.start(timeout=self.args.start_timeout)
            self.live.set()
            return True
        cmd = self.command()
        if cmd is None:
            return False
        with open(self.log, "w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                         bufsize=1, cwd=PEERS, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        return True

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("config: "):
                self.config.append(line[len("config: "):].strip())
            elif line.startswith(LIVE):
                self.live.set()

    def check(self) -> None:
        """Raise if the job has ended or failed."""
        if self.app is not None:
            self.app.check()
        elif self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{LABELS[self.engine]} exited with code "
                               f"{self.proc.returncode}; log: {self.log}")

    def stop(self) -> None:
        if self.app is not None:
            self.app.stop()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own process group (new session)
                self.proc.wait()


def wait_until(moment: float, engine: Engine) -> None:
    while time.time() < moment:
        engine.check()
        time.sleep(min(0.5, max(0.0, moment - time.time())))


def run_engine(engine: str, what: str, rate: float, args: argparse.Namespace, bootstrap: str,
               tag: str, work: str) -> dict[str, Any] | None:
    """One engine's live job ``what`` (sessions, counts) at ``rate``: its figures (None: left
    out)."""
    job = Engine(engine, what, args, bootstrap, tag, work)
    outputs = Outputs(bootstrap, job.counts, engine == "kspark" or engine in KSTREAMS, what)
    ctx = mp.get_context("spawn")
    stop, failed = ctx.Event(), ctx.Value("q", 0)
    producer = ctx.Process(target=produce_steady, args=(bootstrap, job.topic, rate, args.users,
                                                        3, stop, failed), daemon=True)
    if not job.start():
        print(f"{LABELS[engine]}: left out (no interpreter: run benchmarks/peers/setup.sh)",
              flush=True)
        return None
    outputs.start()
    try:
        deadline = time.time() + args.start_timeout
        while not job.live.is_set():
            wait_until(min(deadline, time.time() + 0.5), job)
            if time.time() >= deadline:
                raise RuntimeError(f"{LABELS[engine]} did not start within {args.start_timeout} s")
        producer.start()
        while outputs.first is None:
            wait_until(min(deadline, time.time() + 0.5), job)
            if time.time() >= deadline:
                raise RuntimeError(f"{LABELS[engine]} wrote nothing within "
                                   f"{args.start_timeout} s of its start; log: {job.log}")
        since = outputs.first + args.warm_up
        wait_until(since, job)
        steal = Steal()
        until = since + args.seconds
        wait_until(until, job)
        fraction, load = steal.fraction(), load_text()
        clicks = input_clicks(bootstrap, job.topic, int(since * 1000), int(until * 1000), what)
        last = {user: positions[-1] for user, (positions, _) in clicks.items()}
        drained: float | None = None
        while time.time() < until + args.drain:
            job.check()
            if all(outputs.answered(u, ts) for u, ts in last.items()):
                drained = time.time() - until
                break
            time.sleep(0.25)
    finally:
        stop.set()
        if producer.pid is not None:
            producer.join(120)
        job.stop()
        outputs.stopping.set()
        outputs.join(10)
    delays, missing = latencies(clicks, outputs.received)
    measured = sum(len(p) for p, _ in clicks.values())

    def at(q: float) -> float | None:
        return delays[min(len(delays) - 1, int(len(delays) * q))] / 1000 if delays else None

    figures = {"rate": rate, "reached": measured / args.seconds, "measured": measured,
               "missing": missing, "median": at(0.5), "p95": at(0.95), "p99": at(0.99),
               "max": delays[-1] / 1000 if delays else None, "drained": drained,
               "steal": Steal.text(fraction), "load": load, "refused": failed.value,
               "config": "; ".join(job.config), "delays": delays}
    print(f"{LABELS[engine]}, {what} job at {rate:,.0f} clicks/s: {figures['config']}\n  "
          f"{measured:,} clicks measured ({figures['reached']:,.0f}/s), latency median "
          f"{text(at(0.5))} s, "
          f"p95 {text(at(0.95))} s, p99 {text(at(0.99))} s, max {text(figures['max'])} s, "
          f"{missing:,} without output; {figures['steal']}, {load}", flush=True)
    return figures


def text(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


# -- rates ----------------------------------------------------------------------------------
def throughputs(args: argparse.Namespace, engines: list[str]) -> dict[str, float]:
    """Each engine's records/s on the sessions job: ``--throughput``'s, else measured by a short
    ``peers.py`` throughput run (``--half-records`` clicks) of those without one."""
    given = {e: float(v) for e, _, v in (item.partition("=") for item in
                                         args.throughput.split(",") if item)}
    missing = [e for e in engines if e not in given]
    if missing:
        cmd = [sys.executable, os.path.join(os.path.dirname(PEERS), "peers.py"), "--engines",
               ",".join(missing), "--records", str(args.half_records), "--warm-up",
               str(args.half_records // 4), "--users", str(args.users), "--master", args.master,
               "--flink-python", args.flink_python, "--quix-python", args.quix_python,
               "--flink-jar", args.flink_jar]
        print(f"throughput first, for 50 %: {' '.join(cmd)}", flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        current = None
        for line in out.splitlines():
            for e in missing:
                if line.startswith(f"{LABELS[e]}: "):
                    current = e
            found = re.match(r"\s+([\d,]+) records/s", line)
            if found and current is not None:
                given[current] = float(found.group(1).replace(",", ""))
                print(f"  {LABELS[current]}: {found.group(1)} records/s", flush=True)
                current = None
    return given


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="peers.py latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=DEFAULT, help=f"of {', '.join(ENGINES)}")
    parser.add_argument("--rate", default="5000",
                        help="clicks/s, comma-separated; 'half': 50 %% of each engine's own "
                             "throughput")
    parser.add_argument("--throughput", default="",
                        help="engine=records/s,... for --rate half (else measured first)")
    parser.add_argument("--half-records", type=int, default=200_000,
                        help="clicks of the throughput run for --rate half")
    parser.add_argument("--job", default="sessions,counts",
                        help="sessions (the sessions job, emitting on update where the engine "
                             "can), counts (a running count per user), comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured, per engine")
    parser.add_argument("--warm-up", type=float, default=10.0,
                        help="seconds after the engine's first output left out")
    parser.add_argument("--drain", type=float, default=60.0,
                        help="at most this long after the measured clicks for their outputs")
    parser.add_argument("--users", type=int, default=10_000)
    add_engine_options(parser)
    parser.add_argument("--flink-checkpoint-ms", type=int, default=200)
    parser.add_argument("--quix-commit", type=float, default=0.1, help="seconds")
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument("--chart", help="write a PNG of the latency distributions")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if set(engines) - set(ENGINES):
        parser.error(f"unknown engines {sorted(set(engines) - set(ENGINES))}; known: {ENGINES}")
    rates = [r.strip() for r in args.rate.split(",") if r.strip()]
    jobs = [j.strip() for j in args.job.split(",") if j.strip()]
    if set(jobs) - {"sessions", "counts"}:
        parser.error(f"unknown jobs {sorted(set(jobs) - {'sessions', 'counts'})}")
    half = throughputs(args, engines) if "half" in rates else {}
    work = tempfile.mkdtemp(prefix="kspark-peers-latency-")
    tables: list[tuple[str, dict[str, dict[str, Any]]]] = []
    failures: list[str] = []
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        prepare_coordinators(bootstrap)
        for tag, (what, rate_text) in enumerate((j, r) for j in jobs for r in rates):
            results: dict[str, dict[str, Any]] = {}
            for engine in engines:
                if rate_text == "half" and engine not in half:
                    failures.append(f"{LABELS[engine]}: no throughput figure for --rate half")
                    continue
                rate = half[engine] / 2 if rate_text == "half" else float(rate_text)
                try:
                    figures = run_engine(engine, what, rate, args, bootstrap, str(tag), work)
                except Exception as exc:  # the next engine still runs
                    failures.append(f"{LABELS[engine]}, {what} job at {rate:,.0f}/s: {exc}")
                    print(f"FAILED: {failures[-1]}", flush=True)
                    continue
                if figures is not None:
                    results[engine] = figures
                    failures += verdict(engine, what, figures)
            tables.append((f"the {what} job at "
                           + ("a steady 50 % of each engine's throughput" if rate_text == "half"
                              else f"a steady {float(rate_text):,.0f} clicks/s"), results))
    for title, results in tables:
        counts = title.startswith("the counts")
        print(f"\nlatency of {title}, {args.users:,} users, Kafka to Kafka, {os.cpu_count()} "
              f"cores; from production to the first output covering the click, read "
              f"read_committed; {args.seconds:g} s measured after {args.warm_up:g} s of warm-up:")
        side_by_side([
            ("input rate, clicks/s", {e: f"{r['rate']:,.0f}" for e, r in results.items()}),
            ("reached while measured", {e: f"{r['reached']:,.0f}" for e, r in results.items()}),
            ("median latency, s", {e: text(r["median"]) for e, r in results.items()}),
            ("p95 latency, s", {e: text(r["p95"]) for e, r in results.items()}),
            ("p99 latency, s", {e: text(r["p99"]) for e, r in results.items()}),
            ("max latency, s", {e: text(r["max"]) for e, r in results.items()}),
            ("clicks measured", {e: f"{r['measured']:,}" for e, r in results.items()}),
            ("clicks without output", {e: f"{r['missing']:,}" for e, r in results.items()}),
            ("all answered after the input, s", {e: text(r["drained"])
                                                 for e, r in results.items()}),
            ("emits", {e: "on update" if counts or e not in AT_CLOSE else "at close"
                       for e in results}),
            ("CPU steal", {e: r["steal"] for e, r in results.items()}),
            ("load at the end", {e: r["load"] for e, r in results.items()}),
        ], list(results), LABELS)
        for e, r in results.items():
            print(f"  {LABELS[e]}: {r['config']}")
    if args.chart:
        chart(args.chart, tables)
    for failure in failures:
        print(f"FAILED: {failure}")
    sys.exit(1 if failures else 0)


def verdict(engine: str, job: str, r: dict[str, Any]) -> list[str]:
    """What is wrong with an engine's run (empty: nothing)."""
    wrong = []
    if r["reached"] < 0.9 * r["rate"]:
        wrong.append(f"{LABELS[engine]}: the producer reached {r['reached']:,.0f} of "
                     f"{r['rate']:,.0f} clicks/s")
    if r["refused"]:
        wrong.append(f"{LABELS[engine]}: the broker refused {r['refused']:,} clicks")
    if engine in AT_CLOSE and job == "sessions":
        if r["missing"] > r["measured"] / 2:
            print(f"NOTE: {LABELS[engine]} answered {r['measured'] - r['missing']:,} of "
                  f"{r['measured']:,} clicks: it emits a session only when it closes", flush=True)
    elif r["missing"] > r["measured"] / 2:
        wrong.append(f"{LABELS[engine]}: {r['missing']:,} of {r['measured']:,} clicks never "
                     f"answered")
    return wrong


def chart(path: str, tables: list[tuple[str, dict[str, dict[str, Any]]]]) -> None:
    from charts import distributions

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=PEERS).stdout.strip() or "?"
    distributions(path, f"produce-to-output latency, Kafka to Kafka "
                  f"({time.strftime('%Y-%m-%d')}, {commit}, {os.cpu_count()} cores)",
                  [(title, {LABELS[e]: ([d / 1000 for d in r["delays"]], r["measured"])
                            for e, r in results.items() if r["delays"]})
                   for title, results in tables])
