"""What the benchmarks of kspark on Spark share (``spark_vs_native.py``,
``spark_join_vs_native.py``, ``kafka_stream_table_join.py``): each engine measured in a process
of its own (its own Spark driver JVM, JIT and Python workers), started as the benchmark's own
script with ``--engine NAME``, which prints one :data:`RESULT` line of JSON per run; each
engine's Spark settings; a kspark app run to the end of its input, timed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

#: how an engine's process hands its figures to the benchmark's
RESULT = "spark_vs_native result: "

#: the settings of each engine's session printed with its runs
SHOWN_CONF = ("spark.master", "spark.sql.shuffle.partitions",
              "spark.sql.streaming.stateStore.providerClass",
              "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
              "spark.sql.streaming.noDataMicroBatches.enabled", "spark.driver.memory",
              "spark.driver.defaultJavaOptions", "spark.python.daemon.module")


def engine_spark_conf(engine: str, extra: list[str]) -> dict[str, str]:
    """The Spark session of one engine: kspark's local session as ``spark=None`` starts it;
    native on the same settings but the JVM's default JIT (kspark's local session keeps to the
    client compiler, which slows Spark's own operators, see ``kspark.spark.session``)."""
    conf = {"spark.driver.defaultJavaOptions": ""} if engine == "native" else {}
    conf.update(kv.split("=", 1) for kv in extra)
    return conf


def session_text(spark: Any) -> str:
    """The settings of :data:`SHOWN_CONF` of a session, as one line."""
    conf = spark.sparkContext.getConf()
    return "; ".join(f"{k.removeprefix('spark.')}={conf.get(k, '(default)') or '(none)'}"
                     for k in SHOWN_CONF)


def print_result(result: dict[str, Any]) -> None:
    """One run's figures, for :func:`run_engine` of the benchmark's process."""
    print(RESULT + json.dumps(result), flush=True)


def run_engine(script: str, engine: str, argv: list[str], verbose: bool = False
               ) -> list[dict[str, Any]]:
    """Runs ``script`` with ``argv`` and ``--engine engine``: one engine's measurements in a
    process of its own (its own JVM, JIT and Python workers, with its own warm-up); returns its
    result lines. Its lines indented by two spaces are printed with ``verbose`` (or when it
    fails), those starting with ``"config: "`` always."""
    proc = subprocess.run([sys.executable, script, *argv, "--engine", engine],
                          capture_output=True, text=True, check=False)
    results = [json.loads(line[len(RESULT):]) for line in proc.stdout.splitlines()
               if line.startswith(RESULT)]
    for line in proc.stdout.splitlines():
        if line.startswith("config: "):
            print(f"[{engine}] {line}")
    if verbose or proc.returncode != 0:
        print("\n".join(line for line in proc.stdout.splitlines()
                        if line.startswith("  ")))
    if proc.returncode != 0:
        sys.exit(f"the {engine} run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return results


def state_text(op: dict[str, Any]) -> str:
    """What a stateful operator's progress says of its state: rows, memory, the commit, and
    RocksDB's figures of the micro-batch (bytes written, commit phases)."""
    custom = op.get("customMetrics", {})
    wanted = ("rocksdbTotalBytesWritten", "rocksdbCommitWriteBatchLatency",
              "rocksdbCommitFlushLatency", "rocksdbCommitCheckpointLatency",
              "rocksdbPutLatency", "rocksdbWriterStallLatencyMs")
    return (f"rows {op.get('numRowsTotal')} updated {op.get('numRowsUpdated')} memory "
            f"{op.get('memoryUsedBytes', 0) / 2**20:.0f} MiB commit {op.get('commitTimeMs')} ms "
            + " ".join(f"{k.removeprefix('rocksdb')}={custom[k]}" for k in wanted
                       if k in custom))


def run_app(app: Any, verbose: bool = False) -> tuple[float, list[dict[str, Any]], dict[str, int]]:
    """Start ``app`` (a ``StreamsApp``), process all its input and stop it: the seconds from
    ``start()`` to all processed, the query's progress reports and the app's metrics. With
    ``verbose``, prints how long ``start()`` took and each micro-batch's timings."""
    t0 = time.perf_counter()
    app.start()
    started = time.perf_counter() - t0
    try:
        app.process_all_available()
    finally:
        elapsed = time.perf_counter() - t0
        progress = app.query.recentProgress if app.query is not None else []
        metrics = app.metrics()
        app.stop()
    if verbose:
        print(f"  kspark: start() {started:.2f}s")
        for p in progress:
            print(f"  kspark batch {p['batchId']}: rows {p['numInputRows']} {p['durationMs']}"
                  + "".join(f"; state {state_text(op)}" for op in p.get("stateOperators", ())))
    return elapsed, progress, metrics
