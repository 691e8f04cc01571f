"""Benchmark: kspark's stream-stream join on Spark against Spark's native stream-stream join, in
one run on the same records: the ad-impressions workload of ``benchmarks/join_workload.py``
(2 M records by default, about 1 M impressions and 1 M clicks, 10 k keys, timestamps increasing
but for 5 % held back by up to 0.5 s), joined within +-10 s, in 10 micro-batches, on
``local[2]``.

    .venv/bin/python benchmarks/spark_join_vs_native.py --records 2000000 --batches 10 --repeat 2
    .venv/bin/python benchmarks/spark_join_vs_native.py --kind left --repeat 2

Both engines read the same Parquet files (per topic one file per micro-batch, one file per
trigger):

- native: ``impressions.withWatermark("t", grace).join(clicks.withWatermark("ct", grace),
  expr("key = ckey AND ct BETWEEN t - INTERVAL diff AND t + INTERVAL diff"), "inner" or
  "leftOuter")``, append mode, memory sink, no-data micro-batches on (Spark's default: a left
  outer join emits the unmatched rows a watermark closes in the next micro-batch, with or
  without data); run twice (``--native-state``): with RocksDB state, the provider kspark's
  ``transformWithState`` stage must use and Spark's choice for large state, and with the
  HDFS-backed provider (all state in the JVM's memory), native's fastest on this workload's
  small state;
- kspark: a ``StreamsApp`` of ``impressions.join(clicks, joiner,
  JoinWindows.of_time_difference_and_grace(diff, grace))`` (``left_join`` with ``--kind
  left``), inputs ``kspark.io.files(format="parquet", key_field="key", timestamp_field="ts",
  partitions=P)`` (each row's JSON as the value), output a Parquet file topic;
- with ``--floor``, Spark's floor for kspark's query (``benchmarks/spark_floor.py``): the same
  query with a stage that only reads its input; native's time over the floor's is the highest
  ratio kspark's stage could reach.

Each engine runs in a process of its own (its own Spark driver JVM, JIT and Python workers),
warmed up (unmeasured) on the workload's first ``--warmup`` records in one and in two
micro-batches, with the settings of ``benchmarks/spark_vs_native.py`` (``spark_engines.py``):
kspark's local session, native the same but for the JVM's default JIT. Runs alternate between
the engines. Records/s: the input records over the time from query start until all input is
processed (planning included). Each run prints the CPU steal while it ran.

The check: every record is unique (its ``id``), so each engine's output is a set of pairs
(impression id, click id). With a watermark delay and a grace (both ``--grace-ms``, 1 s) larger
than the workload's disorder (0.5 s), neither engine drops or evicts anything a later record
could still join: an inner join's pairs are exactly the pairs of the same key within +-10 s
(computed from the input: "reference"), and both engines' sets must be equal to it. With
``--kind left`` a last micro-batch of records an hour later than the rest (one per kspark task,
on both topics, pairing with each other) closes every window: kspark emits an unmatched
impression once stream time passes its window's end plus grace, native once the watermark
passes it (in the no-data micro-batch after the last); the matched pairs and the unmatched
impressions of each engine are compared with each other and with the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import join_workload as w
import numpy as np
import pandas as pd
import spark_engines
from machine import Steal, WorkerMemory
from pure_python import core_mode
from spark_engines import engine_spark_conf, print_result, run_app, session_text
from spark_floor import FLOORS, install

from kspark.hashing import kafka_partition

VERBOSE = False
#: where inputs and scratch files go
BENCH = os.path.join(tempfile.gettempdir(), "kspark-bench")
#: Spark's in-memory state store provider (native only: kspark's transformWithState needs RocksDB)
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: the last micro-batch of ``--kind left``: this much later than the rest
FLUSH_AFTER_MS = 3_600_000
COLUMNS = {w.IMPRESSIONS: {"n": "slot"}, w.CLICKS: {"n": "x", "m": "y"}}


# -- the input -----------------------------------------------------------------------------------
def flush_records(frame: pd.DataFrame, partitions: int) -> pd.DataFrame:
    """One impression and one click of the same key, an hour after the last record, for each of
    ``partitions`` partitions (a kspark task's stream time is its partition's own)."""
    keys: dict[int, str] = {}
    i = 0
    while len(keys) < partitions:
        key = f"flush-{i}"
        keys.setdefault(kafka_partition(key.encode(), partitions), key)
        i += 1
    ts = int(frame["ts"].max()) + FLUSH_AFTER_MS
    rows = []
    next_id = int(frame["id"].max()) + 1
    for topic in w.TOPICS:
        for p in sorted(keys):
            rows.append({"topic": topic, "key": keys[p], "ts": ts, "id": next_id, "ad": "ad-0",
                         "n": 0, "m": 0})
            next_id += 1
    return pd.DataFrame(rows)


def write_topics(frame: pd.DataFrame, path: str, batches: int, flush: pd.DataFrame | None,
                 row_groups: int = 1) -> str:
    """Each topic of ``frame`` cut in ``batches`` Parquet files of consecutive records (then one
    file of ``flush``) under ``path/<topic>/``, written once (a directory renamed into place)."""
    if os.path.exists(path):
        return path
    tmp = f"{path}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    step = -(-len(frame) // batches)
    for topic in w.TOPICS:
        os.makedirs(f"{tmp}/{topic}")
        parts = [frame.iloc[i * step:(i + 1) * step] for i in range(batches)]
        if flush is not None:
            parts.append(flush)
        for i, part in enumerate(parts):
            rows = part[part["topic"] == topic].drop(columns="topic")
            rows = rows.drop(columns=[c for c in ("n", "m") if c not in COLUMNS[topic]])
            rows = rows.rename(columns=COLUMNS[topic]).reset_index(drop=True)
            rows.to_parquet(f"{tmp}/{topic}/part-{i:05d}.parquet",
                            row_group_size=max(1, -(-len(rows) // row_groups)))
    os.rename(tmp, path)
    return path


def workload(args: argparse.Namespace) -> pd.DataFrame:
    """The records of the measured runs, the flush batch's included (``--kind left``)."""
    frame = w.make_frame(args.records, args.keys)
    if args.kind == "left":
        frame = pd.concat([frame, flush_records(frame, args.partitions)], ignore_index=True)
    return frame


def input_path(args: argparse.Namespace) -> str:
    """The measured runs' input (written on first use)."""
    path = (f"{BENCH}/join_in_{args.records}_{args.keys}_{args.batches}"
            + (f"_flush{args.partitions}" if args.kind == "left" else ""))
    if not os.path.exists(path):
        frame = w.make_frame(args.records, args.keys)
        flush = flush_records(frame, args.partitions) if args.kind == "left" else None
        write_topics(frame, path, args.batches, flush)
    return path


def warmup_paths(args: argparse.Namespace) -> list[str]:
    """The warm-up inputs: the workload's first ``--warmup`` records in one and in two
    micro-batches (and the flush batch with ``--kind left``), each file in two row groups so
    that a warm-up batch reads in as many parallel tasks as the measured ones (as
    ``spark_vs_native.py`` warms up)."""
    paths = []
    for batches in (1, 2):
        path = (f"{BENCH}/join_warmup{batches}_{args.records}_{args.keys}_{args.warmup}"
                + (f"_flush{args.partitions}" if args.kind == "left" else ""))
        if not os.path.exists(path):
            head = w.make_frame(args.records, args.keys).iloc[:args.warmup]
            flush = flush_records(head, args.partitions) if args.kind == "left" else None
            write_topics(head, path, batches, flush, row_groups=2)
        paths.append(path)
    return paths


# -- pairs ---------------------------------------------------------------------------------------
def encode(imp: np.ndarray, click: np.ndarray) -> np.ndarray:
    """Pairs as one int64 each: ``imp * 2**32 + click + 1`` (a missing click, -1, as 0)."""
    return imp.astype(np.int64) * (1 << 32) + (click.astype(np.int64) + 1)


def save_pairs(pairs: np.ndarray) -> str:
    fd, path = tempfile.mkstemp(prefix="join-pairs-", suffix=".npy", dir=BENCH)
    os.close(fd)
    np.save(path, np.sort(pairs))
    return path


def load_pairs(path: str) -> np.ndarray:
    try:
        return np.load(path)
    finally:
        os.remove(path)


# -- native --------------------------------------------------------------------------------------
def run_native(spark: Any, path: str, args: argparse.Namespace) -> tuple[float, np.ndarray, int]:
    from pyspark.sql import functions as F

    ck = f"{BENCH}/ck-native-join"
    shutil.rmtree(ck, ignore_errors=True)
    spark.sql("drop view if exists native_join")
    spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions))
    # Spark's default: a no-data batch runs when the watermark moved, evicting the state it
    # closes and emitting a left outer join's unmatched rows
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    imp_schema = spark.read.parquet(f"{path}/{w.IMPRESSIONS}").schema
    clk_schema = spark.read.parquet(f"{path}/{w.CLICKS}").schema
    t0 = time.perf_counter()
    delay = f"{args.grace_ms} milliseconds"
    impressions = (
        spark.readStream.schema(imp_schema).option("maxFilesPerTrigger", 1)
        .parquet(f"{path}/{w.IMPRESSIONS}")
        .withColumn("t", F.timestamp_millis("ts")).withWatermark("t", delay))
    clicks = (
        spark.readStream.schema(clk_schema).option("maxFilesPerTrigger", 1)
        .parquet(f"{path}/{w.CLICKS}")
        .select(F.col("key").alias("ckey"), F.col("id").alias("cid"), F.col("ts").alias("cts"),
                F.timestamp_millis("ts").alias("ct"))
        .withWatermark("ct", delay))
    bound = (f"key = ckey AND ct BETWEEN t - INTERVAL {args.diff_ms} MILLISECONDS "
             f"AND t + INTERVAL {args.diff_ms} MILLISECONDS")
    joined = impressions.join(clicks, F.expr(bound),
                              "inner" if args.kind == "inner" else "leftOuter")
    out = joined.select("key", F.col("id").alias("imp"), F.col("cid").alias("click"), "ad",
                        F.greatest("ts", "cts").alias("timestamp"))
    q = (out.writeStream.format("memory").queryName("native_join").outputMode("append")
         .option("checkpointLocation", ck).start())
    q.processAllAvailable()
    elapsed = time.perf_counter() - t0
    if VERBOSE:
        for p in q.recentProgress:
            print(f"  native batch {p['batchId']}: rows {p['numInputRows']} {p['durationMs']}")
    batches = sum(1 for _ in q.recentProgress)
    q.stop()
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")  # kspark's
    rows = spark.sql("select imp, click from native_join").toPandas()
    pairs = encode(rows["imp"].to_numpy(), rows["click"].fillna(-1).to_numpy())
    return elapsed, pairs, batches


# -- kspark --------------------------------------------------------------------------------------
def topology(kind: str, diff_ms: int, grace_ms: int) -> Any:
    from kspark import JoinWindows, StreamJoined, StreamsBuilder, serdes

    builder = StreamsBuilder()
    impressions = builder.stream(w.IMPRESSIONS, serdes.String(), serdes.Json())
    clicks = builder.stream(w.CLICKS, serdes.String(), serdes.Json())
    join = impressions.join if kind == "inner" else impressions.left_join
    (join(clicks, w.joiner, JoinWindows.of_time_difference_and_grace(diff_ms, grace_ms),
          StreamJoined.with_(serdes.String(), serdes.Json(), serdes.Json()))
     .to("joined", serdes.String(), serdes.Json()))
    return builder.build()


def run_kspark(spark: Any, path: str, args: argparse.Namespace, config: dict[str, Any]
               ) -> tuple[float, np.ndarray, dict[str, Any]]:
    from kspark import io
    from kspark.spark import StreamsApp

    work = f"{BENCH}/kspark-join"
    shutil.rmtree(work, ignore_errors=True)
    out = io.files(f"{work}/out", format="parquet", typed=False)
    topics: dict[str, Any] = {
        topic: io.files(f"{path}/{topic}", format="parquet", key_field="key",
                        timestamp_field="ts", partitions=args.partitions, max_files_per_trigger=1)
        for topic in w.TOPICS}
    topics["joined"] = out
    app = StreamsApp(topology(args.kind, args.diff_ms, args.grace_ms), "bench-join", topics,
                     spark=spark, config=config, checkpoint_dir=f"{work}/ck")
    elapsed, _, metrics = run_app(app, VERBOSE)
    values = [json.loads(r["value"]) for r in out.read_records()]
    pairs = encode(np.array([v["imp"] for v in values], dtype=np.int64),
                   np.array([-1 if v["click"] is None else v["click"] for v in values],
                            dtype=np.int64))
    return elapsed, pairs, {"dropped": metrics["dropped-records-total"],
                            "batches_run": metrics["batches"]}


# -- one engine's process ------------------------------------------------------------------------
def measure_engine(args: argparse.Namespace) -> None:
    """One engine's runs in this process's own Spark driver (JVM): the warm-up, then the
    measured run; prints its result line for :func:`main`."""
    from pyspark import cloudpickle

    from kspark.spark.session import local_spark

    # the joiner goes to the executors' Python workers by value (they cannot import the
    # benchmark's modules)
    cloudpickle.register_pickle_by_value(w)
    native = args.engine.startswith("native")
    extra = args.spark_conf + ([f"spark.sql.streaming.stateStore.providerClass={HDFS}"]
                               if args.engine == "native-hdfs" else [])
    spark = local_spark("local[2]", engine_spark_conf("native" if native else args.engine,
                                                      extra))
    config = dict(kv.split("=", 1) for kv in args.conf)
    if args.engine == "floor":
        install(args.floor)
    print(f"config: Spark session: {session_text(spark)}")
    if native:
        print(f"config: native {'inner' if args.kind == 'inner' else 'leftOuter'} join, "
              f"watermarks {args.grace_ms} ms on both sides, bound +-{args.diff_ms} ms, "
              f"append mode, memory sink, shuffle partitions {args.partitions}, no-data "
              "micro-batches on")
    else:
        print(f"config: kspark {'join' if args.kind == 'inner' else 'left_join'}, JoinWindows "
              f"+-{args.diff_ms} ms grace {args.grace_ms} ms, {args.partitions} partitions "
              f"(tasks), kspark config {config or '(defaults)'}, Parquet file topics in and out"
              + (f"; Spark's floor ({args.floor}) instead of kspark's stage"
                 if args.engine == "floor" else ""))

    def run(path: str) -> dict[str, Any]:
        steal = Steal()
        with WorkerMemory() as memory:
            if native:
                elapsed, pairs, batches = run_native(spark, path, args)
                figures: dict[str, Any] = {"batches_run": batches, "dropped": 0}
            else:
                elapsed, pairs, figures = run_kspark(spark, path, args, config)
        return {"elapsed": elapsed, "steal": steal.fraction(), "memory": memory.text(),
                "pairs": pairs, **figures}

    if args.warmup:
        for path in warmup_paths(args):
            run(path)
    result = run(input_path(args))
    result["pairs"] = save_pairs(result["pairs"])
    print_result(result)
    spark.stop()


# -- the benchmark -------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000,
                        help="records of both topics together")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches of the input")
    parser.add_argument("--kind", choices=["inner", "left"], default="inner")
    parser.add_argument("--partitions", type=int, default=4,
                        help="kspark tasks (source partitions) and native shuffle partitions")
    parser.add_argument("--diff-ms", type=int, default=w.DIFF_MS)
    parser.add_argument("--grace-ms", type=int, default=w.GRACE_MS,
                        help="kspark's grace and native's watermark delay (both sides)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=250_000,
                        help="records of each engine's unmeasured warm-up runs (0: none)")
    parser.add_argument("--skip-native", action="store_true")
    parser.add_argument("--native-state", default="rocksdb,hdfs",
                        help="native's state store providers, each a run of its own: rocksdb "
                        "(kspark's, Spark's for large state) and/or hdfs (in memory, "
                        "native's fastest on this workload)")
    parser.add_argument("--floor", choices=FLOORS,
                        help="also Spark's floor for kspark's query (benchmarks/spark_floor.py)")
    parser.add_argument("--conf", action="append", default=[], help="extra kspark config k=v")
    parser.add_argument("--spark-conf", action="append", default=[],
                        help="extra Spark setting k=v of both engines' sessions")
    parser.add_argument("--verbose", action="store_true", help="print each micro-batch's timings")
    parser.add_argument("--engine", choices=["native", "native-hdfs", "kspark", "floor"],
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def check(name: str, pairs: np.ndarray, expected: np.ndarray, kind: str) -> tuple[bool, str]:
    """How an engine's pairs compare with the reference."""
    dups = len(pairs) - len(np.unique(pairs))
    matched = pairs[pairs % (1 << 32) != 0]
    unmatched = pairs[pairs % (1 << 32) == 0]
    exp_matched = expected[expected % (1 << 32) != 0]
    exp_unmatched = expected[expected % (1 << 32) == 0]
    ok = dups == 0 and np.array_equal(pairs, expected)
    text = f"{name}: {len(matched):,} pairs"
    if kind == "left":
        text += f" + {len(unmatched):,} unmatched impressions"
    text += (f" ({'=' if ok else '!='} reference: {len(np.setdiff1d(matched, exp_matched)):,} "
             f"pairs not in it, {len(np.setdiff1d(exp_matched, matched)):,} of it missing")
    if kind == "left":
        text += (f"; unmatched {len(np.setdiff1d(unmatched, exp_unmatched)):,} not in it, "
                 f"{len(np.setdiff1d(exp_unmatched, unmatched)):,} of it missing")
    text += f"{f'; {dups:,} emitted twice' if dups else ''})"
    return ok, text


def main() -> None:
    args = parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    os.makedirs(BENCH, exist_ok=True)
    if args.engine:
        measure_engine(args)
        return
    print(core_mode())
    frame = workload(args)
    input_path(args)
    ref = w.reference_pairs(frame, args.diff_ms)
    expected = encode(ref["id_imp"].to_numpy(), ref["id_click"].to_numpy())
    if args.kind == "left":
        imps = frame.loc[frame["topic"] == w.IMPRESSIONS, "id"].to_numpy()
        lonely = np.setdiff1d(imps, ref["id_imp"].to_numpy())
        expected = np.concatenate([expected, encode(lonely, np.full(len(lonely), -1))])
    expected = np.sort(expected)
    n = len(frame)
    counts = frame["topic"].value_counts()
    print(f"workload: {n:,} records ({counts[w.IMPRESSIONS]:,} impressions, "
          f"{counts[w.CLICKS]:,} clicks), {args.keys:,} keys, {args.batches} micro-batches"
          + (f" + 1 of {2 * args.partitions} records an hour later" if args.kind == "left"
             else "")
          + f"; {args.kind} join within +-{args.diff_ms} ms; reference: "
          f"{len(ref):,} pairs"
          + (f", {len(expected) - len(ref):,} impressions without a partner"
             if args.kind == "left" else ""))
    warmup = (f"warmed up (unmeasured) on the first {args.warmup:,} records in one and in two "
              "micro-batches" if args.warmup else "not warmed up")
    print("each run of an engine is a process of its own (Spark driver JVM, Python workers), "
          f"{warmup}; runs alternate between engines")
    argv = sys.argv[1:]
    natives = [] if args.skip_native else [
        {"rocksdb": "native", "hdfs": "native-hdfs"}[x] for x in args.native_state.split(",")]
    summary: list[tuple[int, str, float, float, list[tuple[str, float, float]]]] = []
    all_ok = True
    for rep in range(args.repeat):
        runs: dict[str, dict[str, Any]] = {}
        engines = natives + ["kspark"] + (["floor"] if args.floor else [])
        for engine in engines:
            (r,) = spark_engines.run_engine(__file__, engine, argv, VERBOSE)
            r["pairs"] = load_pairs(r["pairs"])
            runs[engine] = r
            name = {"native": "native stream-stream join (RocksDB state)",
                    "native-hdfs": "native stream-stream join (HDFS-backed state, in memory)",
                    "kspark": "kspark",
                    "floor": f"Spark's floor for kspark's query ({args.floor})"}[engine]
            print(f"[run {rep + 1}] {name}: {r['elapsed']:.2f}s {n / r['elapsed']:,.0f} rec/s; "
                  f"micro-batches {r['batches_run']}; dropped {r['dropped']}; "
                  f"{Steal.text(r['steal'])}; {r['memory']}")
        for engine in (*natives, "kspark"):
            ok, text = check(engine, runs[engine]["pairs"], expected, args.kind)
            all_ok &= ok
            print(f"  {text}")
        for native in natives:
            same = np.array_equal(runs[native]["pairs"], runs["kspark"]["pairs"])
            all_ok &= same
            print(f"  outputs: {'EQUAL' if same else 'DIFFERENT'} sets of "
                  f"{'pairs' if args.kind == 'inner' else 'pairs and unmatched impressions'} "
                  f"({native} {len(runs[native]['pairs']):,}, kspark "
                  f"{len(runs['kspark']['pairs']):,} output records)")
        if "floor" in runs and len(runs["floor"]["pairs"]):
            sys.exit("the floor run wrote records: its processor was not the floor's")
        for engine in ("kspark", "floor"):
            if engine in runs:
                summary.append((rep + 1, engine, n / runs[engine]["elapsed"],
                                runs[engine]["steal"],
                                [(x, n / runs[x]["elapsed"], runs[x]["steal"])
                                 for x in natives]))
    print(f"summary ({args.kind} join, records/s):")
    for rep, engine, rate, steal, against in summary:
        ratios = "".join(f"  {x} {x_rate:>10,.0f}: {engine}/{x} {rate / x_rate:.2f}x "
                         f"({Steal.text(x_steal)})" for x, x_rate, x_steal in against)
        print(f"  run {rep} {engine:<7} {rate:>10,.0f} ({Steal.text(steal)}){ratios}")
    print("outputs of every run: " + ("AGREE with each other and the reference" if all_ok
                                      else "DIFFER (see above)"))
    if not all_ok:
        sys.exit("the engines' outputs differ (see above)")


if __name__ == "__main__":
    main()
