"""Benchmark: kspark's session count on Spark against Spark's native ``session_window`` count,
in one run on the same data (the clickstream workload of ``benchmarks/clickstream.py``,
2 M events and 10 k users by default; gap 10 s, grace 10 s), on ``local[2]``.

    .venv/bin/python benchmarks/spark_vs_native.py --batches 1,10 --repeat 2

Both engines read the same Parquet files (one file per micro-batch, one file per trigger):

- native: ``session_window`` count in append mode with a watermark of the grace period, memory
  sink (``--native-sink parquet``: Parquet files, for outputs too large for the driver),
  RocksDB state, no-data micro-batches on (Spark's default, so that the sessions the last
  watermark closes are emitted);
- kspark: a ``StreamsApp`` with a DSL session count, input ``kspark.io.files(format="parquet",
  key_field="key", timestamp_field="ts", partitions=P)``, output a Parquet file topic. Emit
  strategy ``on_window_close`` (final sessions only, the fair comparison with append mode) and
  ``on_window_update`` with caching (one update per session and micro-batch);
- with ``--floor``, Spark's floor for kspark's query (``benchmarks/spark_floor.py``): the same
  query and settings as kspark's ``on_window_close`` run, its stage's processor reading its
  input and doing nothing else; native's time over the floor's is the highest ratio kspark's
  stage could reach.

Each engine runs in a process of its own, so that each has its own Spark driver JVM, JIT and
Python workers, warmed up on a slice of the workload before it is measured; the runs alternate
between the engines (native, kspark, native, kspark with ``--repeat 2``). kspark runs on the
local session ``spark=None`` starts (``kspark.spark.session.local_spark``); native runs on the
same settings except the JVM's JIT, which stays at the JVM's default (kspark's local session
keeps to the client compiler, which makes native 1.3 to 1.6x slower).

Every figure is records/s from query start until all input is processed (planning included).
Each run also prints the CPU steal of the machine while it ran (``/proc/stat``): on a shared
virtual machine the hypervisor's steal slows the runs unevenly, and a ratio measured under much
steal says little.
The session counts are checked against the reference: the true sessions of the workload
(``reference_sessions.py``) and, for emitted final sessions, those closed by each engine's own
rule at the end of the input (kspark: per task, ``end < stream time - gap - grace``; native:
``end + gap <= watermark``), with kspark's dropped (late) records reported beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import time
from typing import Any

import numpy as np
import pandas as pd
import spark_engines
from machine import Steal, WorkerMemory
from pure_python import core_mode
from session_workload import load_gen, session_count_topology
from spark_engines import RESULT, engine_spark_conf, run_app
from spark_floor import FLOORS, install
from spark_stages import UI_CONF, print_stage_summary, stage_ids

VERBOSE = False


def split_input(gen: Any, n: int, k: int, batches: int) -> str:
    """The workload split into ``batches`` Parquet files (one file per trigger)."""
    src = gen.make(n, k)
    path = f"{gen.BENCH}/native_in_{n}_{k}_{batches}"
    if not os.path.exists(path):
        os.makedirs(path)
        frame = pd.read_parquet(src)
        step = -(-len(frame) // batches)
        for i in range(batches):
            frame.iloc[i * step : (i + 1) * step].to_parquet(f"{path}/part-{i:05d}.parquet")
    return path


# -- reference figures ---------------------------------------------------------------------------
def session_table(frame: pd.DataFrame, gap: int) -> pd.DataFrame:
    """Every true session of the workload: key, start, end (all events, no lateness)."""
    d = frame.sort_values(["key", "ts"], kind="stable")
    keys, ts = d["key"].to_numpy(), d["ts"].to_numpy()
    new = np.r_[True, (keys[1:] != keys[:-1]) | (np.diff(ts) > gap)]
    sid = np.cumsum(new)
    g = pd.DataFrame({"key": keys, "ts": ts, "sid": sid}).groupby("sid")
    return pd.DataFrame({"key": g["key"].first(), "start": g["ts"].min(), "end": g["ts"].max()})


def expected_closed(frame: pd.DataFrame, sessions: pd.DataFrame, gap: int, grace: int,
                    partitions: int) -> tuple[int, int]:
    """Sessions closed at the end of the input: (kspark rule per task, native watermark rule)."""
    from kspark.hashing import kafka_partition

    task_of = {k: kafka_partition(k.encode(), partitions) for k in frame["key"].unique()}
    frame_task = frame["key"].map(task_of)
    stream_time = frame.groupby(frame_task)["ts"].max()
    close = sessions["key"].map(task_of).map(stream_time) - gap - grace
    kspark = int((sessions["end"] < close).sum())
    watermark = int(frame["ts"].max()) - grace
    native = int((sessions["end"] + gap <= watermark).sum())
    return kspark, native


# -- native --------------------------------------------------------------------------------------
def run_native(spark: Any, gen: Any, src: str, path: str, partitions: int, grace: int,
               sink: str = "memory") -> tuple[float, int]:
    from pyspark.sql import functions as F

    ck = f"{gen.BENCH}/ck-native-cmp"
    shutil.rmtree(ck, ignore_errors=True)
    spark.sql("drop view if exists native_cmp")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    # Spark's default: a no-data batch emits what the last data batch's watermark closes
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    schema = spark.read.parquet(src).schema
    t0 = time.perf_counter()
    out = f"{gen.BENCH}/native-out"
    shutil.rmtree(out, ignore_errors=True)
    counts = (
        spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)
        .withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", f"{grace} milliseconds")
        .groupBy(F.session_window("t", f"{gen.GAP_MS} milliseconds"), "key").count()
    )
    writer = (counts.writeStream.format("memory").queryName("native_cmp") if sink == "memory"
              else counts.writeStream.format("parquet").option("path", out))
    q = writer.outputMode("append").option("checkpointLocation", ck).start()
    q.processAllAvailable()
    elapsed = time.perf_counter() - t0
    if VERBOSE:
        for p in q.recentProgress:
            print(f"  native batch {p['batchId']}: rows {p['numInputRows']} {p['durationMs']}")
    q.stop()
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")  # kspark's
    emitted = (spark.sql("select count(*) c from native_cmp").collect()[0].c if sink == "memory"
               else spark.read.schema(counts.schema).parquet(out).count())
    return elapsed, int(emitted)


# -- kspark --------------------------------------------------------------------------------------
def run_kspark(spark: Any, gen: Any, path: str, on_close: bool, partitions: int, grace: int,
               config: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    from kspark import io
    from kspark.spark import StreamsApp

    work = f"{gen.BENCH}/kspark-cmp"
    shutil.rmtree(work, ignore_errors=True)
    out = io.files(f"{work}/out", format="parquet", typed=False)  # raw, as measured before
    source = io.files(path, format="parquet", key_field="key", timestamp_field="ts",
                      value_field="value", partitions=partitions, max_files_per_trigger=1)
    app = StreamsApp(
        session_count_topology(gen.GAP_MS, grace, on_close),
        "bench-sessions",
        {"clicks": source, "sessions": out},
        spark=spark,
        config=config,
        checkpoint_dir=f"{work}/ck",
    )
    elapsed, _, metrics = run_app(app, VERBOSE)
    rows = pd.DataFrame(out.read_records(), columns=["key", "value", "timestamp", "partition"])
    last = rows.drop_duplicates("key", keep="last")
    return elapsed, {
        "out": len(rows),
        "live": int(last["value"].notna().sum()),
        "dropped": metrics["dropped-records-total"],
        "batches_run": metrics["batches"],
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", default="1,10", help="comma-separated batch counts")
    parser.add_argument("--partitions", type=int, default=4,
                        help="kspark tasks (source partitions) and native shuffle partitions")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--emit", choices=["close", "update", "both"], default="both")
    parser.add_argument("--skip-native", action="store_true")
    parser.add_argument("--conf", action="append", default=[], help="extra kspark config k=v")
    parser.add_argument("--spark-conf", action="append", default=[],
                        help="extra Spark setting k=v of both engines' sessions")
    parser.add_argument("--verbose", action="store_true", help="print each micro-batch's timings")
    parser.add_argument("--stages", action="store_true",
                        help="print where each stage's time goes (Spark's UI on; with --verbose)")
    parser.add_argument("--warmup", type=int, default=250_000,
                        help="records of each engine's unmeasured warm-up runs (0: none)")
    parser.add_argument("--native-sink", choices=["memory", "parquet"], default="memory",
                        help="native's sink: the memory table (default) or Parquet files, for "
                             "outputs too large for the driver's memory")
    parser.add_argument("--grace-ms", type=int, default=None,
                        help="grace period instead of the workload's (a longer one keeps "
                             "sessions in the store longer: a larger state)")
    parser.add_argument("--floor", choices=FLOORS,
                        help="also Spark's floor for kspark's query (benchmarks/spark_floor.py): "
                             "the stage's processor only reads its input (read) or not even "
                             "that (empty); with on_window_close's settings")
    parser.add_argument("--engine", choices=["native", "kspark", "floor"],
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def grace_of(args: argparse.Namespace, gen: Any) -> int:
    """The grace period (native: the watermark's delay) of the runs."""
    return gen.GRACE_MS if args.grace_ms is None else args.grace_ms


def measure_engine(args: argparse.Namespace) -> None:
    """One engine's runs, in this process's own Spark driver (JVM): a warm-up, then every
    batch count; prints one result line per run for :func:`main`."""
    from kspark.spark.session import local_spark

    gen = load_gen()
    n, k = args.records, args.keys
    src = gen.make(n, k)
    conf = engine_spark_conf(args.engine, args.spark_conf)
    spark = local_spark("local[2]", {**UI_CONF, **conf} if args.stages else conf)
    config = dict(kv.split("=", 1) for kv in args.conf)
    grace = grace_of(args, gen)
    modes = [] if args.engine == "native" else (
        {"close": [True], "update": [False], "both": [True, False]}[args.emit])
    if args.engine == "floor":
        install(args.floor)
        modes = [True]

    def run(path: str, on_close: bool | None) -> dict[str, Any]:
        steal = Steal()
        with WorkerMemory() as memory:
            if on_close is None:
                elapsed, emitted = run_native(spark, gen, src, path, args.partitions, grace,
                                              args.native_sink)
                figures: dict[str, Any] = {"out": emitted}
            else:
                elapsed, figures = run_kspark(spark, gen, path, on_close, args.partitions, grace,
                                              config)
        return {"elapsed": elapsed, "steal": steal.fraction(), "memory": memory.text(),
                **figures}

    runs = [None] if args.engine == "native" else modes
    if args.warmup:
        # the JVM and Python workers warm up on the workload's first records, unmeasured: one
        # run in one micro-batch and one in two, so that the measured runs' paths (state
        # restored from an earlier batch too) are warm; each file in two row groups of more
        # than PARQUET_SPLIT_ROWS, so that a warm-up batch reads in as many parallel tasks
        # (Python workers) as the measured ones
        for batches in (1, 2):
            path = f"{gen.BENCH}/warmup{batches}_{n}_{k}_{args.warmup}"
            if not os.path.exists(path):
                os.makedirs(path)
                head = pd.read_parquet(src).iloc[: args.warmup]
                step = -(-len(head) // batches)
                for i in range(batches):
                    part = head.iloc[i * step : (i + 1) * step]
                    part.to_parquet(f"{path}/part-{i:05d}.parquet",
                                    row_group_size=-(-len(part) // 2))
            for on_close in runs:
                run(path, on_close)
    for index, batches in enumerate(int(b) for b in args.batches.split(",")):
        path = split_input(gen, n, k, batches)
        for on_close in runs:
            before = stage_ids(spark) if args.stages else -1
            result = {"index": index, "batches": batches, "on_close": on_close,
                      **run(path, on_close)}
            if args.stages:  # indented: the benchmark's process prints them (--verbose)
                summary = io.StringIO()
                with contextlib.redirect_stdout(summary):
                    print_stage_summary(spark, before, f"{args.engine}, {batches} batches")
                print("\n".join("  " + line for line in summary.getvalue().splitlines()))
            print(RESULT + json.dumps(result), flush=True)
    spark.stop()


def run_engine(engine: str, argv: list[str]) -> list[dict[str, Any]]:
    """Runs one engine's measurements in a process of its own (its own JVM, JIT and Python
    workers, with its own warm-up) and returns its result lines."""
    return spark_engines.run_engine(__file__, engine, argv, VERBOSE)


def main() -> None:
    args = parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    if args.engine:
        measure_engine(args)
        return
    print(core_mode())

    gen = load_gen()
    n, k = args.records, args.keys
    frame = pd.read_parquet(gen.make(n, k))
    sessions = session_table(frame, gen.GAP_MS)
    closed_kspark, closed_native = expected_closed(
        frame, sessions, gen.GAP_MS, grace_of(args, gen), args.partitions
    )
    print(f"workload N={len(frame)} K={k}: reference sessions {len(sessions)}; closed at end of "
          f"input: {closed_kspark} by kspark's rule, {closed_native} by native's watermark")
    warmup = (f"warmed up (unmeasured) on the first {args.warmup} records in one and in two "
              "micro-batches" if args.warmup else "not warmed up")
    print("each run of an engine is a process of its own (Spark driver JVM, Python workers), "
          f"{warmup}; runs alternate between engines")
    summary = []
    for rep in range(args.repeat):
        native = {} if args.skip_native else {
            r["index"]: r for r in run_engine("native", sys.argv[1:])}
        for r in native.values():
            print(f"[batches={r['batches']} run {rep + 1}] native session_window append: "
                  f"{r['elapsed']:.2f}s {n / r['elapsed']:,.0f} rec/s, sessions emitted "
                  f"{r['out']} (expected {closed_native}); {Steal.text(r['steal'])}; "
                  f"{r['memory']}")
        for r in run_engine("kspark", sys.argv[1:]):
            nat = native.get(r["index"])
            rate = n / r["elapsed"]
            name = "on_window_close" if r["on_close"] else "on_window_update+caching"
            check = (f"sessions emitted {r['out']} (expected {closed_kspark})" if r["on_close"]
                     else f"{r['out']} updates, live sessions in final table {r['live']} "
                          f"(reference {len(sessions)})")
            ratio, native_rate, adjusted = "", None, None
            if nat is not None:
                native_rate = n / nat["elapsed"]
                ratio = f", kspark/native {rate / native_rate:.2f}"
                if nat["steal"] is not None and r["steal"] is not None:
                    # both runs' elapsed time scaled by the share of the CPU they had
                    adjusted = (nat["elapsed"] * (1 - nat["steal"])) / (
                        r["elapsed"] * (1 - r["steal"]))
                    ratio += f" (steal-adjusted {adjusted:.2f})"
            print(f"[batches={r['batches']} run {rep + 1}] kspark {name}: {r['elapsed']:.2f}s "
                  f"{rate:,.0f} rec/s{ratio}; {check}; dropped {r['dropped']}; "
                  f"micro-batches {r['batches_run']}; {Steal.text(r['steal'])}; "
                  f"{r['memory']}")
            summary.append((r["batches"], f"kspark {name}", rate, native_rate, adjusted))
        if args.floor:
            for r in run_engine("floor", sys.argv[1:]):
                if r["out"]:
                    sys.exit(f"the floor run wrote {r['out']} records: its processor was not "
                             "the floor's")
                nat = native.get(r["index"])
                ceiling = "" if nat is None else (
                    f", native/floor {nat['elapsed'] / r['elapsed']:.2f} (the highest "
                    f"kspark/native ratio a stage could reach)")
                print(f"[batches={r['batches']} run {rep + 1}] Spark's floor for kspark's query "
                      f"({args.floor}): {r['elapsed']:.2f}s {n / r['elapsed']:,.0f} rec/s"
                      f"{ceiling}; micro-batches {r['batches_run']}; {Steal.text(r['steal'])}")
                summary.append((r["batches"], f"floor ({args.floor})", n / r["elapsed"],
                                None if nat is None else n / nat["elapsed"], None))
    print("summary (records/s):")
    for batches, name, rate, native_rate, adjusted in sorted(summary, key=lambda x: x[0]):
        nat = "" if native_rate is None else (
            f" native {native_rate:,.0f} ratio {rate / native_rate:.2f}")
        if adjusted is not None:
            nat += f" steal-adjusted {adjusted:.2f}"
        print(f"  batches={batches:<3} {name:<32} {rate:>10,.0f}{nat}")


if __name__ == "__main__":
    main()
