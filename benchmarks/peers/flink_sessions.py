"""The sessions job on Apache Flink (PyFlink Table API / SQL in a local MiniCluster), from a Kafka
topic to Kafka topics, in a process of its own for ``benchmarks/peers.py`` (run by the Flink
venv's python: apache-flink's pins clash with pyspark's, so it never enters kspark's venv).

clicks (key: user id, value: {"page": ...}, record timestamp: event time)
  -> per user, Flink SQL's SESSION window table-valued function, gap 10 s, on the Kafka record
     timestamp with the watermark ``ts - INTERVAL '10' SECOND`` (the grace);
     one window aggregation computes the count and the pages, both sinks read it
  -> counts topic: {"user", "start", "end", "window_end", "count"}
  -> pages topic:  {"user", "start", "end", "window_end", "pages"}  (pages in timestamp order,
     or with --pages-order arrival in arrival order, as kspark's appending aggregator)
  each keyed by the user, the record timestamp the session's last click, written exactly once
  (Kafka transactions committed on Flink's checkpoints).

``start``/``end`` follow Kafka Streams' convention (the first and the last click, inclusive);
Flink's session window is ``[first click, last click + gap)``: ``window_end`` is Flink's
(exclusive) end, ``end = window_end - gap``.

A session is emitted once, when the watermark passes ``window_end - 1``. By default the read is
bounded (``scan.startup.mode = earliest-offset``, ``scan.bounded.mode = latest-offset``: the
records there when the job starts); at its end the source emits the final watermark
(Long.MAX_VALUE), which closes every open session, and Flink triggers the final checkpoint at
once, which commits the last transactions; then the job, and the script, end. ``--unbounded``
reads until Ctrl-C or SIGTERM, which cancel the job; ``--live`` is the same, saying when the job
runs (``benchmarks/peers_latency.py``: a session is still emitted only when the watermark passes
its end, and is visible to ``read_committed`` readers only at the next checkpoint).

Late records are dropped by the window operator: a record whose own window ``[ts, ts + gap)``,
after merging with its user's open sessions, ends at or before the watermark. The operator
counts them in its metric ``numLateRecordsDropped`` (no topic, no log line); the script samples
it, with the operator's ``numRecordsIn`` and ``currentInputWatermark``, from the MiniCluster's
REST API every 0.1 s: ``dropped`` is final (``dropped_final``) when the last sample had seen the
final watermark (Long.MAX_VALUE) on every subtask, which comes after all its records.

For ``benchmarks/peers.py`` it speaks ``protocol``: a ``config:`` line, an optional warm-up run
on other topics in the same process and JVM (``--warm-up-input``, outputs to
``<counts>-warm-up`` / ``<pages>-warm-up``), then ``peers: measuring``, the measured run
(planning, the job's MiniCluster, the job, its last commit), and ``peers: result {"elapsed",
"warm_up_s", "dropped", ...}``.

Setup: ``benchmarks/peers/setup.sh`` (a virtual environment of its own with
``requirements-flink.txt``, by default ``~/.cache/kspark/peers/flink``, and the connector jar
``org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2`` in ``~/.cache/kspark/peers/jars``:
built for Flink 2.2, it runs on 2.3; 4.0.1-2.0 is the one for Flink 2.0).

Usage:
    ~/.cache/kspark/peers/flink/bin/python benchmarks/peers/flink_sessions.py \\
        --bootstrap 127.0.0.1:9092 --input clicks --counts flink-session-counts \\
        --pages flink-session-pages [--parallelism 2] [--checkpoint-ms 10000] [--jar PATH] \\
        [--warm-up-input TOPIC] [--unbounded] [--watermark-emit on-periodic|on-event] ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

import protocol

GAP_S = 10
GRACE_S = 10
DEFAULT_JAR = os.path.join(
    os.environ.get("KSPARK_CACHE_DIR", os.path.expanduser("~/.cache/kspark")), "peers", "jars",
    "flink-sql-connector-kafka-5.0.0-2.2.jar")
#: the pages are sorted as strings prefixed with the event time (13 digits of epoch ms) and the
#: Kafka offset (19 digits: a user's clicks share a partition), which make a string sort a time
#: sort (ties: arrival order), or with the offset alone (arrival order)
PREFIX_WIDTH = {"time": 13 + 19, "arrival": 19}
#: the watermark a bounded source emits at its end (Long.MAX_VALUE)
MAX_WATERMARK = 2**63 - 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers HOST:PORT")
    p.add_argument("--input", required=True, help="input topic of clicks")
    p.add_argument("--counts", required=True, help="output topic: clicks per session")
    p.add_argument("--pages", required=True, help="output topic: pages per session")
    p.add_argument("--warm-up-input", help="process this topic first, in the same process")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--checkpoint-ms", type=int, default=10_000,
                   help="checkpoint interval: the transactions commit on each checkpoint (what "
                        "read_committed readers wait for); a bounded run ends with a checkpoint "
                        "of its own at once (default: 10000)")
    p.add_argument("--jar", default=DEFAULT_JAR, help="flink-sql-connector-kafka jar")
    p.add_argument("--unbounded", action="store_true",
                   help="keep reading (until Ctrl-C or SIGTERM) instead of stopping at the "
                        "offsets that are the latest when the job starts")
    p.add_argument("--live", action="store_true",
                   help="--unbounded, saying when the job runs (benchmarks/peers_latency.py)")
    p.add_argument("--job", choices=["sessions", "counts"], default="sessions",
                   help="counts: a running count of each user's clicks (GROUP BY user, an "
                        "updating table) to an upsert-kafka sink on --counts, exactly once")
    p.add_argument("--pages-impl", choices=["sql", "python"], default="sql",
                   help="sql: ARRAY_SORT over ARRAY_AGG of time-prefixed pages (all in the JVM); "
                        "python: ARRAY_AGG of rows sorted by a Python scalar UDF once per "
                        "session (a Python worker; about half the throughput) (default: sql)")
    p.add_argument("--pages-order", choices=["time", "arrival"], default="time",
                   help="the order of a session's pages: their timestamps' (default) or their "
                        "arrival (Kafka offset) order, as an aggregator that appends has it")
    p.add_argument("--watermark-emit", choices=["on-periodic", "on-event"],
                   default="on-periodic",
                   help="scan.watermark.emit.strategy: on-periodic (every "
                        "--watermark-interval-ms; Flink's default) or on-event (after every "
                        "record: closer to Kafka Streams' stream time, about half the "
                        "throughput)")
    p.add_argument("--watermark-interval-ms", type=int, default=200,
                   help="pipeline.auto-watermark-interval (default: 200, Flink's)")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka consumer property of the source (repeatable)")
    p.add_argument("--state-backend", choices=["hashmap", "rocksdb"], default="hashmap")
    p.add_argument("--restart-attempts", type=int, default=0,
                   help="restarts after a failure (default: 0, fail at once)")
    p.add_argument("--group-id", default="peers-flink")
    p.add_argument("--txn-prefix", default=None,
                   help="sink.transactional-id-prefix base (default: peers-flink-<pid>-<ms>)")
    p.add_argument("--rest-port", type=int, default=0,
                   help="the MiniCluster's REST port, to read the late-drop metric (default: a "
                        "free one; -1: no REST endpoint, no metric)")
    p.add_argument("--explain", action="store_true", help="print the plan before running")
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings(args: argparse.Namespace, rest_port: int) -> dict[str, str]:
    """The Flink configuration of the run (printed at start)."""
    conf = {
        "execution.runtime-mode": "streaming",
        "parallelism.default": str(args.parallelism),
        "pipeline.jars": "file://" + os.path.abspath(args.jar),
        "pipeline.object-reuse": "true",
        "pipeline.auto-watermark-interval": f"{args.watermark_interval_ms} ms",
        "execution.checkpointing.interval": f"{args.checkpoint_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        # a bounded run commits its last transactions in a checkpoint taken once every task has
        # reached the end of its input (Flink's default since 1.15, set explicitly here)
        "execution.checkpointing.checkpoints-after-tasks-finish": "true",
        # checkpoints into files: the job manager's memory takes at most 5 MB of a task's
        # state, which a million users' sessions overrun
        "execution.checkpointing.storage": "filesystem",
        "execution.checkpointing.dir": "file://" + tempfile.mkdtemp(prefix="flink-ck-"),
        "state.backend.type": args.state_backend,
        # a benchmark fails fast instead of restarting (with checkpointing on, Flink's default
        # is exponential-delay restarts without end)
        **({"restart-strategy.type": "none"} if args.restart_attempts == 0 else {
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": str(args.restart_attempts),
            "restart-strategy.fixed-delay.delay": "1 s"}),
        "table.local-time-zone": "UTC",
        # both sinks read one session-window aggregation (the view), not one each: without it
        # the planner plans the view twice, as two window operators
        "table.optimizer.reuse-optimize-block-with-digest-enabled": "true",
        # the MiniCluster's metric fetcher refreshes often enough for the end-of-run sample
        "metrics.fetcher.update-interval": "100 ms",
    }
    if args.unbounded:
        # a live job checkpoints its growing state as often as every 200 ms: a late checkpoint
        # does not fail the job
        conf["execution.checkpointing.tolerable-failed-checkpoints"] = "10"
    if rest_port > 0:
        conf.update({"rest.port": str(rest_port), "rest.bind-port": str(rest_port),
                     "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1"})
    if args.pages_impl == "python":
        conf["python.executable"] = sys.executable
        conf["python.client.executable"] = sys.executable
    return conf


def ddl(args: argparse.Namespace, tag: str, source: str, counts: str, pages: str,
        txn_prefix: str, bounded: bool) -> list[str]:
    """The tables of one job (``tag`` keeps a warm-up's apart from the measured run's)."""
    kafka = (f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{args.bootstrap}', "
             "'key.format' = 'raw', 'key.fields' = 'user'")
    scan = ", 'scan.bounded.mode' = 'latest-offset'" if bounded else ""
    for kv in args.consumer_property:
        key, _, value = kv.partition("=")
        scan += f", 'properties.{key}' = '{value}'"
    tables = [f"""
        CREATE TEMPORARY TABLE clicks_{tag} (
            `user` STRING,
            page STRING,
            ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
            `offset` BIGINT METADATA VIRTUAL,
            WATERMARK FOR ts AS ts - INTERVAL '{GRACE_S}' SECOND
        ) WITH ({kafka}, 'topic' = '{source}',
            'properties.group.id' = '{args.group_id}-{tag}',
            'scan.startup.mode' = 'earliest-offset',
            'scan.watermark.emit.strategy' = '{args.watermark_emit}',
            'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY'{scan})"""]
    for name, topic, column, kind in (("counts", counts, "`count`", "BIGINT"),
                                      ("pages", pages, "pages", "ARRAY<STRING>")):
        tables.append(f"""
        CREATE TEMPORARY TABLE {name}_{tag} (
            `user` STRING,
            `start` BIGINT,
            `end` BIGINT,
            window_end BIGINT,
            {column} {kind},
            last_click TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'
        ) WITH ({kafka}, 'topic' = '{topic}',
            'value.format' = 'json', 'value.fields-include' = 'ALL',
            'sink.delivery-guarantee' = 'exactly-once',
            'sink.transactional-id-prefix' = '{txn_prefix}-{tag}-{name}',
            'properties.transaction.timeout.ms' = '900000')""")
    return tables


def counts_sink(args: argparse.Namespace, tag: str, counts: str, txn_prefix: str) -> str:
    """``--job counts``: an upsert-kafka table of each user's running count (JSON ``{"user",
    "count"}``), exactly once."""
    return f"""
        CREATE TEMPORARY TABLE user_counts_{tag} (
            `user` STRING,
            `count` BIGINT,
            PRIMARY KEY (`user`) NOT ENFORCED
        ) WITH ('connector' = 'upsert-kafka', 'topic' = '{counts}',
            'properties.bootstrap.servers' = '{args.bootstrap}',
            'key.format' = 'raw', 'value.format' = 'json', 'value.fields-include' = 'ALL',
            'sink.delivery-guarantee' = 'exactly-once',
            'sink.transactional-id-prefix' = '{txn_prefix}-{tag}-user-counts',
            'properties.transaction.timeout.ms' = '900000')"""


def epoch_ms(col: str) -> str:
    return f"(EXTRACT(EPOCH FROM {col}) * 1000 + EXTRACT(MILLISECOND FROM {col}))"


def sessions_view(args: argparse.Namespace, tag: str) -> str:
    """One session-window aggregation (read by both sinks): the count and the pages."""
    by_time = args.pages_order == "time"
    if args.pages_impl == "sql":
        tagged = ((f"LPAD(CAST({epoch_ms('ts')} AS STRING), 13, '0') || " if by_time else "")
                  + "LPAD(CAST(`offset` AS STRING), 19, '0') || COALESCE(page, '')")
        # sorted, joined with U+001F, the prefixes cut off, split again
        width = PREFIX_WIDTH[args.pages_order]
        pages = (f"SPLIT(REGEXP_REPLACE(ARRAY_JOIN(ARRAY_SORT(ARRAY_AGG({tagged})), "
                 f"CHR(31)), '(?<=^|\\x1f)[0-9]{{{width}}}', ''), CHR(31))")
    else:
        ts = epoch_ms("ts") if by_time else "0"
        pages = f"sort_pages(ARRAY_AGG(ROW({ts}, `offset`, COALESCE(page, ''))))"
    return f"""
        CREATE TEMPORARY VIEW sessions_{tag} AS
        SELECT `user`, window_start, window_end, COUNT(*) AS n, {pages} AS pages
        FROM TABLE(SESSION(TABLE clicks_{tag} PARTITION BY `user`, DESCRIPTOR(ts),
                           INTERVAL '{GAP_S}' SECOND))
        GROUP BY `user`, window_start, window_end"""


def inserts(tag: str) -> list[str]:
    last = f"window_end - INTERVAL '{GAP_S}' SECOND"
    cols = (f"`user`, {epoch_ms('window_start')}, {epoch_ms(last)}, {epoch_ms('window_end')}")
    stamp = f"CAST({last} AS TIMESTAMP_LTZ(3))"
    return [f"INSERT INTO counts_{tag} SELECT {cols}, n, {stamp} FROM sessions_{tag}",
            f"INSERT INTO pages_{tag} SELECT {cols}, pages, {stamp} FROM sessions_{tag}"]


def register_python_udf(t_env: Any) -> None:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    @udf(result_type=DataTypes.ARRAY(DataTypes.STRING()))
    def sort_pages(rows: list) -> list[str]:
        return [r[2] for r in sorted(rows, key=lambda r: (r[0], r[1]))]

    t_env.create_temporary_function("sort_pages", sort_pages)


class Watcher:
    """Samples the job through the MiniCluster's REST API while it runs: the window operator's
    ``numLateRecordsDropped`` and ``numRecordsIn`` (summed over subtasks) and its input watermark
    (the minimum over subtasks), all from one fetch, and when the last task started."""

    def __init__(self, port: int, job_id: str) -> None:
        self.base = f"http://127.0.0.1:{port}/jobs/{job_id}"
        self.dropped: int | None = None
        self.window_in: int | None = None
        self.final = False
        self.started_ms: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=2) as r:
            return json.load(r)

    def _poll(self) -> None:
        vertices = self._get("")["vertices"]
        starts = [v.get("start-time", -1) for v in vertices]
        if starts and min(starts) > 0:
            self.started_ms = max(starts)
        for v in vertices:
            if "WindowAggregate" not in v["name"]:
                continue
            path = f"/vertices/{v['id']}/subtasks/metrics"
            late = [m["id"] for m in self._get(path) if m["id"].endswith(".numLateRecordsDropped")]
            got = {m["id"]: m for m in self._get(f"{path}?agg=sum,min&get=" + ",".join(
                ["numRecordsIn", "currentInputWatermark", *late]))}
            if "numRecordsIn" in got and late:
                self.window_in = int(got["numRecordsIn"]["sum"])
                self.dropped = int(sum(got[name]["sum"] for name in late if name in got))
                watermark = got.get("currentInputWatermark", {}).get("min", 0)
                self.final = float(watermark) >= float(MAX_WATERMARK)  # REST: doubles

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # the job is starting or has ended
                self._poll()
            self._stop.wait(0.1)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def run_job(t_env: Any, args: argparse.Namespace, tag: str, source: str, counts: str,
            pages: str, txn_prefix: str, rest_port: int, bounded: bool) -> dict[str, Any]:
    """Plan, submit and wait for one job; its figures."""
    t0 = time.time()
    tables = ddl(args, tag, source, counts, pages, txn_prefix, bounded)
    if args.job == "counts":
        statements, writes = [tables[0], counts_sink(args, tag, counts, txn_prefix)], [
            f"INSERT INTO user_counts_{tag} SELECT `user`, COUNT(*) FROM clicks_{tag} "
            f"GROUP BY `user`"]
    else:
        statements, writes = [*tables, sessions_view(args, tag)], inserts(tag)
    for stmt in statements:
        t_env.execute_sql(stmt)
    stmts = t_env.create_statement_set()
    for stmt in writes:
        stmts.add_insert_sql(stmt)
    if args.explain:
        print(stmts.explain(), flush=True)
    result = stmts.execute()  # plans, starts the job's MiniCluster, submits
    if not bounded:
        protocol.live()
    client = result.get_job_client()
    job_id = str(client.get_job_id()) if client is not None else "?"
    figures: dict[str, Any] = {"job_id": job_id, "submit_s": round(time.time() - t0, 2)}
    watcher = Watcher(rest_port, job_id).start() if rest_port > 0 and client else None
    try:
        # wait in Python, where SIGINT/SIGTERM arrive (not in a blocking call into the JVM)
        while client is not None:
            try:
                if client.get_job_status().result().is_globally_terminal_state():
                    break
            except Exception:  # the job's MiniCluster has shut down: the job has ended
                break
            time.sleep(0.1)
        result.wait()  # raises if the job failed
    except KeyboardInterrupt:
        if client is not None:
            client.cancel().result()
        figures["cancelled"] = True
    finally:
        if watcher is not None:
            watcher.stop()
    ended = time.time()
    figures["job_s"] = round(ended - t0, 2)
    if watcher is not None:
        if watcher.started_ms:  # from the last task's start to the end (no planning, no deploy)
            figures["running_s"] = round(ended - watcher.started_ms / 1000, 2)
        figures.update(dropped=watcher.dropped, dropped_final=watcher.final,
                       window_records_in=watcher.window_in)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.unbounded = args.unbounded or args.live
    if not os.path.exists(args.jar):
        sys.exit(f"Kafka SQL connector jar not found: {args.jar} (see --jar)")
    rest_port = free_port() if args.rest_port == 0 else args.rest_port
    txn_prefix = args.txn_prefix or f"peers-flink-{os.getpid()}-{int(time.time() * 1000)}"
    conf = settings(args, rest_port)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    t0 = time.time()
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment
    from pyflink.version import __version__ as pyflink_version

    configuration = Configuration()
    for key, value in conf.items():
        configuration.set_string(key, value)
    def new_env() -> Any:
        """A table environment of its own for each job (in this JVM: a second job planned in
        the first job's environment has failed with Calcite's ``NullPointerException:
        metadataHandlerProvider``, the planner's per-thread state missing on the py4j thread)."""
        env = TableEnvironment.create(EnvironmentSettings.new_instance().in_streaming_mode()
                                      .with_configuration(configuration).build())
        # the connector jar on the context class loader of the py4j thread planning this job
        # (set through the table config, PyFlink adds it there; after a long first job the
        # second was planned on another thread and found no 'kafka' connector factory)
        env.get_config().set("pipeline.jars", conf["pipeline.jars"])
        if args.pages_impl == "python":
            register_python_udf(env)
        return env

    t_env = new_env()
    env_s = time.time() - t0

    pages_how = (f"ARRAY_SORT(ARRAY_AGG({args.pages_order}-prefixed page)) in SQL"
                 if args.pages_impl == "sql" else "ARRAY_AGG(ROW) sorted by a Python scalar UDF")
    pages_how += f", {args.pages_order} order"
    if args.job == "counts":
        print(f"config: Flink {pyflink_version} (PyFlink Table API / SQL, local MiniCluster, "
              f"{os.path.basename(args.jar)}), COUNT(*) GROUP BY user (no mini-batch: an "
              f"update per click) to upsert-kafka, exactly once, parallelism "
              f"{args.parallelism}, checkpoint every {args.checkpoint_ms} ms, "
              f"{args.state_backend} state backend, object reuse, unbounded", flush=True)
    else:
        print(f"config: Flink {pyflink_version} (PyFlink Table API / SQL, local MiniCluster, "
              f"{os.path.basename(args.jar)}), SESSION window TVF (gap {GAP_S} s, watermark ts - "
              f"{GRACE_S} s, {args.watermark_emit}"
              + (f" every {args.watermark_interval_ms} ms" if args.watermark_emit == "on-periodic"
                 else "") + f"), parallelism {args.parallelism}, checkpoint every "
              f"{args.checkpoint_ms} ms, exactly-once Kafka sink (transactions), "
              f"{args.state_backend} state backend, object reuse, pages by {pages_how}, "
              + ("unbounded" if args.unbounded else "bounded (latest offsets at start)")
              + (f", consumer {args.consumer_property}" if args.consumer_property else "")
              + "; mini-batch: n/a (window aggregation)", flush=True)
    print("flink settings: " + json.dumps({**conf, "transactional_id_prefix": txn_prefix,
                                           "table_environment_s": round(env_s, 2)}), flush=True)

    warm_up_s = None
    if args.warm_up_input:
        t1 = time.time()
        warm = run_job(t_env, args, "warm_up", args.warm_up_input, f"{args.counts}-warm-up",
                       f"{args.pages}-warm-up", txn_prefix, rest_port, bounded=True)
        warm_up_s = time.time() - t1
        print("flink warm-up: " + json.dumps(warm), flush=True)
    started = protocol.measuring()
    if args.warm_up_input:
        t_env = new_env()
    run = run_job(t_env, args, "run", args.input, args.counts, args.pages, txn_prefix,
                  rest_port, bounded=not args.unbounded)
    protocol.result(elapsed=time.time() - started, warm_up_s=warm_up_s,
                    table_environment_s=round(env_s, 2), **run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
