"""Runs kspark apps on a Spark master (default ``local-cluster[2,1,1024]``: two executor JVMs,
Python workers in other processes) and writes what they gave as JSON. Usage:
cluster_run.py SEED OUT_JSON CHECKPOINT_DIR [MASTER [BOOTSTRAP PREFIX [KILL_PREFIX]]].

It runs the differential topology on file topics; with BOOTSTRAP and PREFIX, also the main job,
the sessions app from Kafka to Kafka (topics PREFIX + name, see kafka_app_process.py), whose
output stays on Kafka; the JSON then holds that app's metrics. With KILL_PREFIX, the main job
again on those topics, and once its first batch is committed one executor's JVM is killed
(SIGKILL) while the next batches run; the JSON holds the killed pid and that app's metrics."""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kafka"))


def main() -> None:
    seed, out_path, checkpoint = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    master = sys.argv[4] if len(sys.argv) > 4 else "local-cluster[2,1,1024]"
    from spark_harness import run_spark
    from test_spark_differential import INPUT_SERDES, OUTPUTS, random_input, topology

    from kspark.spark.session import local_spark

    spark = local_spark(master, {"spark.executor.memory": "1g"})
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    deadline = time.monotonic() + 60  # the workers' executors register after the session
    while status().size() - 1 < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    executors = status().size() - 1
    actual, _ = run_spark(spark, topology(False), random_input(seed), OUTPUTS, INPUT_SERDES,
                          checkpoint, batches=3, partitions=2, app_id="cluster")
    result = {"executors": executors,
              "outputs": {t: [[repr(k), v, ts] for k, v, ts in recs]
                          for t, recs in actual.items()}}
    if len(sys.argv) > 6:
        from kafka_app_process import sessions_app

        app = sessions_app(sys.argv[5], sys.argv[6], os.path.join(checkpoint, "kafka"), 300,
                           spark=spark)
        app.start()
        try:
            app.process_all_available()
        finally:
            app.stop()
        result["kafka_metrics"] = app.metrics()
    if len(sys.argv) > 7:
        result.update(_run_killing_an_executor(spark, sys.argv[5], sys.argv[7],
                                               os.path.join(checkpoint, "kafka-kill")))
    with open(out_path, "w") as f:
        json.dump(result, f)
    spark.stop()


def executor_pids() -> list[int]:
    """The executor JVMs running on this machine (Spark's CoarseGrainedExecutorBackend)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


def _run_killing_an_executor(spark, bootstrap: str, prefix: str, checkpoint: str) -> dict:
    import signal
    import threading

    from kafka_app_process import sessions_app

    app = sessions_app(bootstrap, prefix, checkpoint, 100, spark=spark)
    app.start()
    killed: list[int] = []

    def kill_one() -> None:  # once a batch is done, mid-way through the next ones
        while app.metrics().get("batches", 0) < 1:
            time.sleep(0.05)
        time.sleep(0.3)
        pids = executor_pids()
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    try:
        app.process_all_available()
        killer.join(60)
        app.process_all_available()
    finally:
        app.stop()
    return {"killed_executor": killed, "kill_metrics": app.metrics(),
            "executors_after": executor_pids()}


if __name__ == "__main__":
    main()
