"""Runs the differential topology on a Spark master (default ``local-cluster[2,1,1024]``: two
executor JVMs, Python workers in other processes) and writes its outputs as JSON. Usage:
cluster_run.py SEED OUT_JSON CHECKPOINT_DIR [MASTER]."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    seed, out_path, checkpoint = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    master = sys.argv[4] if len(sys.argv) > 4 else "local-cluster[2,1,1024]"
    from spark_harness import run_spark
    from test_spark_differential import INPUT_SERDES, OUTPUTS, random_input, topology

    from kspark.spark.session import local_spark

    spark = local_spark(master, {"spark.executor.memory": "1g"})
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    actual, _ = run_spark(spark, topology(False), random_input(seed), OUTPUTS, INPUT_SERDES,
                          checkpoint, batches=3, partitions=2, app_id="cluster")
    with open(out_path, "w") as f:
        json.dump({"executors": executors,
                   "outputs": {t: [[repr(k), v, ts] for k, v, ts in recs]
                               for t, recs in actual.items()}}, f)
    spark.stop()


if __name__ == "__main__":
    main()
