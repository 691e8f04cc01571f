"""Benchmark: the main job (the sessions example: a session count and the pages of each session,
gap and grace 10 s, emitted when a session closes) on every engine, one after the other in one
run, on the same clicks in the same Kafka topic of one embedded Apache Kafka broker, each engine
writing its results back to Kafka topics of its own:

- ``kspark``: kspark on its local Spark session, exactly once
  (``benchmarks/peers/kspark_sessions.py``);
- ``kstreams``: Kafka Streams 4.3 (``benchmarks/kafka-streams-anchor/``) at its defaults under
  exactly-once (commit every 100 ms); ``kstreams-1s`` and ``kstreams-30s``: tuned as its experts
  would for throughput: commits every 1 s / 30 s and a 100 MB record cache; ``kstreams-eager``:
  its defaults but closed sessions looked for on every record (the internal setting
  ``benchmarks/kafka_end_to_end.py`` uses), without which it loses most sessions of a backlog;
- ``spark``: Spark's own ``session_window`` through Spark's Kafka connector
  (``benchmarks/peers/spark_sessions.py``, at least once: Spark's Kafka sink has no transactions);
- ``flink``: Apache Flink (PyFlink, SQL session windows, exactly-once Kafka sink;
  ``benchmarks/peers/flink_sessions.py``, run by ``--flink-python``);
- ``quix``: Quix Streams (session windows, exactly-once; ``benchmarks/peers/quix_sessions.py``,
  run by ``--quix-python``).

Flink and Quix need environments of their own (their pins clash with pyspark's; they are never a
dependency of kspark): ``benchmarks/peers/setup.sh`` makes them (PyPI, Maven Central) where this
benchmark looks by default. An engine whose interpreter is missing is left out, saying so.

Each engine runs in a process of its own (its own JVMs, JIT and Python workers). Where it can, it
first processes ``--warm-up`` other clicks from another topic in the same process, then the
measured clicks: the measured time runs from that moment to all results written and committed.
Kafka Streams (``SessionsApp.java``) runs the warm-up as an application of its own in the same
JVM, then is measured from the moment it makes the measured ``KafkaStreams`` object until its
consumer group has committed the input's end offsets. For every engine the benchmark samples the
process tree (``/proc``): CPU seconds (all its processes) and the peak of their resident memory
together.

Every engine's results are read back (``read_committed``) and compared with kspark's test driver
on the same clicks (one driver per partition, as each engine runs a task per partition): sessions
in both with equal count and pages, sessions only in one of them, sessions written twice. kspark
must equal the driver, and Kafka Streams too except for the sessions the README lists (some
sessions kspark emits that Kafka Streams never does); the run exits non-zero otherwise. The other
engines' semantics differ (how late records and session bounds are decided); their differences are
counted and printed with the reason.

    .venv/bin/python benchmarks/peers.py --records 1000000 --warm-up 200000
    .venv/bin/python benchmarks/peers.py --engines kspark,spark --records 200000 --chart peers.png

``peers.py latency [...]``: produce-to-output latency on every engine at steady rates
(``benchmarks/peers_latency.py``).

``--chart`` writes a PNG of each engine's records/s, CPU seconds per million records and peak
memory (the ``plot`` extra: matplotlib). Memory is the peak of the engine's processes' PSS
together (``machine.ProcessTree``), printed split by kind of process (JVM, Python workers, other
Python processes) at that peak; the RSS is printed beside it. ``--kspark-conf KEY=VALUE`` and
``--spark-conf KEY=VALUE`` give kspark's or Spark's session a setting of its own (e.g.
``spark.driver.memory=1g``; for kspark a key not starting with ``spark.`` is a setting of its
app, e.g. ``state.buckets=4``), printed with the engine's configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from charts import bars
from kafka_job import PARTITIONS, send, side_by_side
from kafka_streams_anchor import KafkaStreamsApp, prepare_coordinators
from machine import ProcessTree, Steal, load_text

from kspark.examples.sessions import generate_clicks
from kspark.hashing import kafka_partition
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")
#: where ``benchmarks/peers/setup.sh`` puts the peers' environments by default
ENVS = os.path.join(os.environ.get("KSPARK_CACHE_DIR", os.path.expanduser("~/.cache/kspark")),
                    "peers")
MEASURING = "peers: measuring"
RESULT = "peers: result "
LABELS = {
    "kspark": "kspark", "kstreams": "Kafka Streams", "kstreams-1s": "KS commit 1 s",
    "kstreams-30s": "KS commit 30 s", "kstreams-eager": "KS emit each record",
    "spark": "Spark native", "flink": "Flink",
    "quix": "Quix Streams",
}
#: Kafka Streams' default interval between emitting closed windows (an internal setting)
KSTREAMS_EMIT_INTERVAL_MS = 1_000
#: what a Kafka Streams configuration changes: commit interval (ms), record cache (bytes), emit
#: interval (ms)
KSTREAMS = {"kstreams": (100, None, KSTREAMS_EMIT_INTERVAL_MS),
            "kstreams-1s": (1_000, 100 << 20, KSTREAMS_EMIT_INTERVAL_MS),
            "kstreams-30s": (30_000, 100 << 20, KSTREAMS_EMIT_INTERVAL_MS),
            "kstreams-eager": (100, None, 0)}
#: why an engine's sessions may differ from Kafka Streams' (the reference's) semantics
WHY = {
    **{ks: "Kafka Streams looks for closed sessions at most once a second of wall-clock time "
           "(its default emit interval); reading a backlog, stream time runs far more than the "
           "store's retention (gap + grace, 20 s) ahead between two looks, and sessions expire "
           "from the store before a look emits them (a live stream, whose stream time follows "
           "the clock, loses none); also the sessions the README lists as a deviation"
       for ks in KSTREAMS if ks != "kstreams-eager"},
    "kstreams-eager": "Kafka Streams with the internal emit interval at 0 (as "
                      "benchmarks/kafka_end_to_end.py runs it): closed sessions are looked for "
                      "on every record; only the sessions the README lists as a deviation differ",
    "spark": "Spark's watermark is the minimum over the partitions and trails the newest "
             "timestamp by the grace; a session closes when the watermark passes its last click "
             "+ gap, and records are late against the watermark, not the partition's stream "
             "time",
    "flink": "Flink's watermark (newest timestamp - grace) is the minimum over the partitions, "
             "emitted every 200 ms: reading a backlog it trails each partition's own time, so "
             "Flink drops far fewer late clicks; a late click it keeps cannot join a session "
             "already emitted and starts one of its own; a session fires when the watermark "
             "passes its last click + gap; the end of a bounded input closes every session",
    "quix": "Quix Streams (closing per partition, as Kafka Streams) emits a session when its "
            "partition's stream time passes its last click + 2 x gap + grace (Kafka Streams: + "
            "gap + grace), and drops a click older than stream time - gap - grace even where "
            "Kafka Streams merges it into a session still open; its Collect gives the pages in "
            "timestamp order (the example's aggregator: as they come); sessions open at the end "
            "stay open",
}

Sessions = dict[tuple[str, int, int], tuple[Any, ...]]


# -- the clicks and the reference ------------------------------------------------------------
def produce(bootstrap: str, topic: str, clicks: list) -> None:
    """Produce ``clicks`` to ``topic`` (4 partitions by user), every delivery checked: the broker
    refuses a timestamp more than an hour ahead of its clock, without a word to a producer that
    does not look."""
    from confluent_kafka import Producer

    ensure_topics(bootstrap, [TopicSpec(topic, PARTITIONS)])
    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 10, "queue.buffering.max.messages": 1_000_000,
                         "on_delivery": delivered})
    for user, click, ts in clicks:
        send(producer, user, click, ts, topic=topic)
    assert producer.flush(300) == 0 and not failed, f"{len(failed)} clicks refused: {failed[:3]}"


def clicks_of(n: int, users: int, seed: int) -> list:
    """``n`` clicks of ``users`` users ending a minute ago (the broker keeps 7 days)."""
    clicks = list(generate_clicks(n, users=users, seed=seed))
    base = int(time.time() * 1000) - 60_000 - max(ts for *_, ts in clicks)
    return [(u, c, base + ts) for u, c, ts in clicks]


def reference(clicks: list) -> tuple[dict[str, Sessions], int]:
    """The sessions kspark's test driver gives (counts and pages), and the late clicks it drops."""
    from kspark import serdes
    from kspark.examples.sessions import topology
    from kspark.testing import TopologyTestDriver

    windowed = serdes.SessionWindowed(serdes.String())
    parts: dict[int, list] = {}
    for click in clicks:
        parts.setdefault(kafka_partition(click[0].encode(), PARTITIONS), []).append(click)
    out: dict[str, Sessions] = {"counts": {}, "pages": {}}
    dropped = 0
    for records in parts.values():
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in records:
                pipe.pipe_input(user, click, ts)
            for kind, topic, serde in (("counts", "session-counts", serdes.Long()),
                                       ("pages", "session-pages", serdes.Json())):
                for r in driver.create_output_topic(topic, windowed, serde).read_records_to_list():
                    if r.value is not None:
                        value = (r.value,) if kind == "counts" else tuple(r.value)
                        out[kind][(r.key.key, r.key.window.start, r.key.window.end)] = value
            dropped += driver.metrics().get("dropped-records-total", 0) // 2
    return out, dropped


# -- the engines -------------------------------------------------------------------------------
def command(engine: str, args: argparse.Namespace, bootstrap: str, counts: str, pages: str,
            work: str) -> list[str] | None:
    """The command line of a subprocess engine (None: its interpreter is missing)."""
    common = ["--bootstrap", bootstrap, "--input", "clicks", "--counts", counts, "--pages", pages]
    if args.warm_up:
        common += ["--warm-up-input", "warm-up-clicks"]
    if engine in ("kspark", "spark"):
        return spark_command(engine, args, common)
    python = args.flink_python if engine == "flink" else args.quix_python
    if not os.path.exists(python):
        return None
    if engine == "flink":
        return [python, os.path.join(PEERS, "flink_sessions.py"), *common,
                "--parallelism", str(args.parallelism), "--jar", args.flink_jar,
                "--pages-order", "arrival"]
    return [python, os.path.join(PEERS, "quix_sessions.py"), *common, "--consumer-group",
            "peers-quix", "--state-dir", os.path.join(work, "quix-state")]


def run_process(engine: str, cmd: list[str], log_path: str, timeout: float) -> dict[str, Any]:
    """Run a subprocess engine to its end: its figures, the measured phase's CPU seconds and
    the peak memory of its process tree."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                cwd=PEERS)
        figures: dict[str, Any] = {}
        cpu_at_start = 0.0
        with ProcessTree(proc.pid) as tree:
            assert proc.stdout is not None
            deadline = time.monotonic() + timeout
            for line in proc.stdout:
                log.write(line)
                if line.startswith("config: "):
                    figures["config"] = line[len("config: "):].strip()
                elif line.startswith(MEASURING):
                    tree.sample()
                    cpu_at_start = tree.cpu_seconds
                elif line.startswith(RESULT):
                    tree.sample()
                    figures.update(json.loads(line[len(RESULT):]))
                    figures["cpu"] = tree.cpu_seconds - cpu_at_start
                if time.monotonic() > deadline:
                    proc.kill()
            code = proc.wait()
        figures["peak_rss"] = tree.peak_rss
        figures["peak_pss"] = tree.peak_pss
        figures["memory_parts"] = tree.parts_text()
    if code != 0 or "elapsed" not in figures:
        raise RuntimeError(f"{LABELS[engine]} failed (exit code {code}); log: {log_path}")
    return figures


def run_kstreams(engine: str, bootstrap: str, counts: str, pages: str, work: str,
                 timeout: float, warm_up: bool) -> dict[str, Any]:
    from kafka_job import end_offsets

    commit_ms, cache, emit_ms = KSTREAMS[engine]
    app = KafkaStreamsApp(bootstrap, f"peers-{engine}", os.path.join(work, engine), "clicks",
                          counts, pages, True, commit_interval_ms=commit_ms, threads=2,
                          cache_max_bytes=cache, emit_interval_ms=emit_ms,
                          warm_up_input="warm-up-clicks" if warm_up else None)
    os.makedirs(app.workdir, exist_ok=True)
    ends = end_offsets(bootstrap, "clicks")
    app.start(timeout=timeout)
    try:
        assert app._proc is not None
        with ProcessTree(app._proc.pid) as tree:  # the JVM's start is not measured
            tree.sample()
            cpu_at_start = tree.cpu_seconds
            done = app.wait_caught_up(ends, timeout=timeout)
            tree.sample()
    finally:
        app.stop()
    dropped = None if app.dropped is None else app.dropped // 2  # both aggregations count
    return {"elapsed": done - app.created_at, "cpu": tree.cpu_seconds - cpu_at_start,
            "peak_rss": tree.peak_rss, "peak_pss": tree.peak_pss,
            "memory_parts": tree.parts_text(), "dropped": dropped,
            "warm_up_s": app.reported.get("warmed-up"),
            "config": f"Kafka Streams 4.3, exactly_once_v2, 2 stream threads, RocksDB, commit "
                      f"every {commit_ms} ms (results are visible at commits: a run shorter "
                      f"than the interval waits for one), closed sessions looked for "
                      + (f"at most every {emit_ms} ms" if emit_ms else "on every record")
                      + ", record cache "
                      f"{'10 MB (default)' if cache is None else f'{cache >> 20} MB'}, JVM -Xmx1g"}


# -- results -----------------------------------------------------------------------------------
def read_sessions(bootstrap: str, counts: str, pages: str, windowed_keys: bool
                  ) -> tuple[dict[str, Counter], int]:
    """An engine's sessions as ``{"counts"|"pages": Counter of ((user, start, last click),
    value)}`` (read_committed; Kafka Streams' session-windowed keys, or JSON values with
    ``user``, ``start``, ``end``), and the tombstones."""
    from kspark.kafka.reader import read_to_end, wait_settled
    from kspark.serdes import SessionWindowed, String

    wait_settled(bootstrap, [counts, pages])
    keys = SessionWindowed(String())
    out: dict[str, Counter] = {"counts": Counter(), "pages": Counter()}
    tombstones = 0
    for kind, topic in (("counts", counts), ("pages", pages)):
        for m in read_to_end(bootstrap, topic):
            if m.value() is None:
                tombstones += 1
                continue
            if windowed_keys:
                w = keys.deserialize(m.key())
                session = (w.key, w.window.start, w.window.end)
                value = ((struct.unpack(">q", m.value())[0],) if kind == "counts"
                         else tuple(json.loads(m.value())))
            else:
                v = json.loads(m.value())
                session = (v["user"], v["start"], v["end"])
                value = (v["count"],) if kind == "counts" else tuple(v["pages"])
            out[kind][(session, value)] += 1
    return out, tombstones


def compare(ref: dict[str, Sessions], got: dict[str, Counter]) -> dict[str, int]:
    """How an engine's sessions compare with the reference's (counts and pages together)."""
    figures = Counter()
    for kind in ("counts", "pages"):
        theirs: dict = {}
        for (session, value), times in got[kind].items():
            theirs.setdefault(session, set()).add(value)
            figures["written twice"] += times - 1
        mine = ref[kind]
        both = mine.keys() & theirs.keys()
        figures["same"] += sum(1 for s in both if theirs[s] == {mine[s]})
        figures["different value"] += sum(1 for s in both if theirs[s] != {mine[s]})
        figures["only in the engine's"] += len(theirs.keys() - mine.keys())
        figures["only in the reference"] += len(mine.keys() - theirs.keys())
    return dict(figures)


def verdict(engine: str, figures: dict[str, int]) -> str | None:
    """Why the run fails for this engine's results (None: as expected)."""
    if engine == "kspark":
        wrong = {k: v for k, v in figures.items() if k != "same" and v}
        return f"kspark differs from its test driver: {wrong}" if wrong else None
    if engine.startswith("kstreams"):
        wrong = {k: v for k, v in figures.items()
                 if k not in ("same", "only in the reference") and v}
        return f"{LABELS[engine]} differs beyond the README's deviation: {wrong}" if wrong else None
    return None


def spark_settings(engine: str, args: argparse.Namespace) -> list[str]:
    """The ``--conf`` arguments of kspark's or Spark's script: ``--kspark-conf`` or
    ``--spark-conf`` (:func:`add_engine_options`)."""
    return [f"--conf={setting}" for setting in getattr(args, f"{engine}_conf")]


def spark_command(engine: str, args: argparse.Namespace, common: list[str]) -> list[str]:
    """The command line of kspark's or Spark's script with the ``common`` arguments, on
    ``--master`` with the engine's settings (kspark's clicks read by ``--kspark-source``)."""
    reader = ["--source", args.kspark_source] if engine == "kspark" else []
    if engine == "kspark" and args.kspark_per_trigger:
        reader += ["--per-trigger", str(args.kspark_per_trigger)]
    return [sys.executable, os.path.join(PEERS, f"{engine}_sessions.py"), *common,
            "--master", args.master, *spark_settings(engine, args), *reader]


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Where the engines run: kspark's and Spark's master, Flink's parallelism, the peers'
    environments (``benchmarks/peers/setup.sh``)."""
    parser.add_argument("--master", default="local[2]")
    for engine in ("kspark", "spark"):
        parser.add_argument(f"--{engine}-conf", action="append", default=[],
                            metavar="KEY=VALUE", help=f"a Spark setting of {engine}'s session")
    parser.add_argument("--kspark-source", choices=("auto", "kspark", "spark"), default="auto",
                        help="what reads kspark's clicks: its Kafka source or Spark's connector")
    parser.add_argument("--kspark-per-trigger", type=int, default=None,
                        help="at most this many clicks in one of kspark's micro-batches "
                        "(default: all available)")
    parser.add_argument("--parallelism", type=int, default=2, help="Flink's")
    parser.add_argument("--flink-python", default=os.path.join(ENVS, "flink", "bin", "python"))
    parser.add_argument("--flink-jar", default=os.path.join(
        ENVS, "jars", "flink-sql-connector-kafka-5.0.0-2.2.jar"))
    parser.add_argument("--quix-python", default=os.path.join(ENVS, "quix", "bin", "python"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="kspark,kstreams,kstreams-1s,kstreams-30s,"
                        "kstreams-eager,spark,flink,quix")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--warm-up", type=int, default=200_000)
    add_engine_options(parser)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--chart", help="write a PNG of records/s, CPU and memory per engine")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - LABELS.keys()
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; known: {sorted(LABELS)}")
    work = tempfile.mkdtemp(prefix="kspark-peers-")
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        prepare_coordinators(bootstrap)
        if args.warm_up:
            produce(bootstrap, "warm-up-clicks", clicks_of(args.warm_up, args.users, 7))
        clicks = clicks_of(args.records, args.users, 1)
        produce(bootstrap, "clicks", clicks)
        print(f"{len(clicks):,} clicks of {args.users:,} users in {PARTITIONS} partitions"
              + (f" (and {args.warm_up:,} warm-up clicks)" if args.warm_up else ""), flush=True)
        ref, ref_dropped = reference(clicks)
        results: dict[str, dict[str, Any]] = {}
        for engine in engines:
            counts, pages = f"{engine}-session-counts", f"{engine}-session-pages"
            topics = [counts, pages] + ([f"{counts}-warm-up", f"{pages}-warm-up"]
                                        if args.warm_up else [])
            ensure_topics(bootstrap, [TopicSpec(t, PARTITIONS) for t in topics])
            steal = Steal()
            if engine in KSTREAMS:
                figures = run_kstreams(engine, bootstrap, counts, pages, work, args.timeout,
                                       bool(args.warm_up))
            else:
                cmd = command(engine, args, bootstrap, counts, pages, work)
                if cmd is None:
                    print(f"{LABELS[engine]}: left out (no interpreter: run "
                          f"benchmarks/peers/setup.sh)", flush=True)
                    continue
                figures = run_process(engine, cmd, os.path.join(work, f"{engine}.log"),
                                      args.timeout)
            figures["steal"] = Steal.text(steal.fraction())
            figures["load"] = load_text()
            got, figures["tombstones"] = read_sessions(
                bootstrap, counts, pages, windowed_keys=engine == "kspark" or engine in KSTREAMS)
            figures["compare"] = compare(ref, got)
            results[engine] = figures
            rate = len(clicks) / figures["elapsed"]
            print(f"{LABELS[engine]}: {figures['config']}\n  {rate:,.0f} records/s, "
                  f"{figures['cpu']:.1f} CPU s, {figures['steal']}, "
                  f"{figures['load']}; peak memory (PSS, MiB) {figures['memory_parts']}; "
                  f"{figures['compare']}", flush=True)
    shown = list(results)
    print(f"\nthe sessions job, {len(clicks):,} clicks, {args.users:,} users, Kafka to Kafka, "
          f"local machine ({os.cpu_count()} cores); reference: kspark's test driver, "
          f"{len(ref['counts']):,} sessions, {ref_dropped:,} late clicks dropped")
    million = len(clicks) / 1e6
    side_by_side([
        ("records/s (measured run)", {e: f"{len(clicks) / r['elapsed']:,.0f}"
                                      for e, r in results.items()}),
        ("seconds", {e: f"{r['elapsed']:.1f}" for e, r in results.items()}),
        ("CPU seconds per million records", {e: f"{r['cpu'] / million:.1f}"
                                             for e, r in results.items()}),
        ("peak memory, all processes (PSS, MiB)", {e: f"{r['peak_pss'] / 2**20:,.0f}"
                                                   for e, r in results.items()}),
        ("the same as RSS (MiB)", {e: f"{r['peak_rss'] / 2**20:,.0f}"
                                   for e, r in results.items()}),
        ("warm-up run first (s)", {e: "no" if not r.get("warm_up_s")
                                   else f"{r['warm_up_s']:.1f}" for e, r in results.items()}),
        *[(f"sessions: {k}", {e: f"{r['compare'].get(k, 0):,}" for e, r in results.items()})
          for k in ("same", "different value", "only in the engine's", "only in the reference",
                    "written twice")],
        ("late clicks dropped", {e: "?" if r.get("dropped") is None else f"{r['dropped']:,}"
                                 for e, r in results.items()}),
        ("CPU steal", {e: r["steal"] for e, r in results.items()}),
    ], shown, LABELS)
    if args.chart:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=HERE).stdout.strip() or "?"
        bars(args.chart, f"the sessions job, {len(clicks):,} clicks, {args.users:,} users, Kafka "
             f"to Kafka ({time.strftime('%Y-%m-%d')}, {commit}, {os.cpu_count()} cores)",
             [LABELS[e].replace(" ", "\n", 1) for e in shown], [
                 ("thousand records/s", [len(clicks) / results[e]["elapsed"] / 1e3
                                         for e in shown], "%.1f"),
                 ("CPU seconds per million records", [results[e]["cpu"] / million
                                                      for e in shown], "%.1f"),
                 ("peak memory, all processes (PSS, GiB)", [results[e]["peak_pss"] / 2**30
                                                            for e in shown], "%.2f")])
    for engine in shown:
        if engine in WHY:
            print(f"  {LABELS[engine]}: {WHY[engine]}")
    failures = [v for v in (verdict(e, r["compare"]) for e, r in results.items()) if v]
    for failure in failures:
        print(f"FAILED: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["latency"]:
        from peers_latency import main as latency

        latency(sys.argv[2:])
    else:
        main()
