"""Benchmark: one Spark task's stream-stream join without Spark: ``run_task_batch`` over the
records of partition 0 (of 4) of ``spark_join_vs_native.py``'s workload (2 M records, 10 k
keys, each record's value the JSON of its whole row, as that benchmark's Parquet source gives
it), in the same 10 batches, with the Spark workers' garbage collection thresholds and no
changelog kept (as on file topics). Prints the CPU time a record of each run.

    .venv/bin/python benchmarks/join_task.py --kind left --repeat 3

Time on a shared machine moves by 10 % from run to run, more than most changes to the task's
code; ``--first N --repeat 1`` under valgrind counts the instructions of the first N batches
instead, which do not move:

    valgrind --tool=callgrind --collect-atstart=no \\
        --toggle-collect=CPyPy_task___Task___process_batch \\
        .venv/bin/python benchmarks/join_task.py --kind left --first 2 --repeat 1

The batches are made once and kept in ``<tmp>/kspark-bench/join_task_<kind>.pkl``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import time

import join_workload as w
import numpy as np
import pandas as pd
from spark_join_vs_native import BENCH, flush_records, topology

from kspark.config import StreamsConfig
from kspark.hashing import kafka_partition
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.serialized import SourceBatch
from kspark.spark.internals.worker_daemon import GC_THRESHOLD

PARTITIONS = 4
BATCHES = 10


def batch_columns(kind: str) -> list[tuple]:
    """Each batch of partition 0 as :class:`SourceBatch` arguments (a left join's last batch:
    the flush records an hour later that close every window)."""
    frame = w.make_frame(2_000_000, 10_000)
    if kind == "left":
        frame = pd.concat([frame, flush_records(frame, PARTITIONS)], ignore_index=True)
    keys = frame["key"].tolist()
    own = np.flatnonzero([kafka_partition(k.encode(), PARTITIONS) == 0 for k in keys])
    rows = frame.iloc[own]
    topics = rows["topic"].tolist()
    encoded = []
    for t, k, ts, id_, ad, n, m in zip(topics, rows["key"].tolist(), rows["ts"].tolist(),
                                       rows["id"].tolist(), rows["ad"].tolist(),
                                       rows["n"].tolist(), rows["m"].tolist()):
        value = {"key": k, "ts": ts, "id": id_, "ad": ad}
        if t == w.IMPRESSIONS:
            value["slot"] = n
        else:
            value["x"], value["y"] = n, m
        encoded.append(json.dumps(value).encode())
    count, stamps = len(rows), rows["ts"].to_numpy(dtype=np.int64)
    body = count - (2 if kind == "left" else 0)  # this partition's flush records: one a topic
    step = -(-body // BATCHES)
    bounds = [(i * step, min(body, (i + 1) * step)) for i in range(BATCHES)]
    if body < count:
        bounds.append((body, count))
    out = []
    for lo, hi in bounds:
        key_col = np.empty(hi - lo, dtype=object)
        key_col[:] = [keys[own[j]].encode() for j in range(lo, hi)]
        value_col = np.empty(hi - lo, dtype=object)
        value_col[:] = encoded[lo:hi]
        out.append((stamps[lo:hi], np.zeros(hi - lo, dtype=np.int64),
                    np.arange(lo, hi, dtype=np.int64), key_col, value_col, None, topics[lo:hi]))
    return out


def load(kind: str) -> list[tuple]:
    path = os.path.join(BENCH, f"join_task_{kind}.pkl")
    if not os.path.exists(path):
        os.makedirs(BENCH, exist_ok=True)
        with open(f"{path}.tmp", "wb") as f:
            pickle.dump(batch_columns(kind), f, protocol=5)
        os.replace(f"{path}.tmp", path)
    with open(path, "rb") as f:
        loaded: list[tuple] = pickle.load(f)
    return loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["inner", "left"], default="left")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first", type=int, help="run only the first N batches")
    args = parser.parse_args()
    batches = load(args.kind)[:args.first]
    topo = topology(args.kind, w.DIFF_MS, w.GRACE_MS)
    sub = topo.sub_topologies()[0]
    config = StreamsConfig.of({}, application_id="join-task")
    records = sum(len(b[0]) for b in batches)
    gc.set_threshold(*GC_THRESHOLD)
    print(f"{args.kind} join, one task: {records:,} records of partition 0 in {len(batches)} "
          f"batches, gc thresholds {GC_THRESHOLD}, no changelog")
    for i in range(args.repeat):
        state, written = DictTaskState(), 0
        began = time.process_time()
        for columns in batches:
            result = run_task_batch(topo, sub, 0, SourceBatch(*columns), state, config,
                                    changelog_stores=())
            written += len(result.output)
        cpu = time.process_time() - began
        print(f"[run {i + 1}] {cpu:.2f} s of CPU, {cpu / records * 1e6:.2f} us a record, "
              f"{written:,} records written", flush=True)


if __name__ == "__main__":
    main()
