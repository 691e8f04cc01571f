"""kspark on a Spark standalone cluster (a master and two workers started from pyspark's own
distribution: each its own JVM with its own Python workers): the differential app on file
topics gives the same output as on the shared ``local[2]`` session, and the main job, Kafka to
Kafka, gives the same read_committed output as local mode, written by the executors: the driver
receives no record rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kafka_app_process import sessions_app
from kafka_util import create, kafka_outputs, produce, sessions_clicks

HERE = os.path.dirname(__file__)
SPARK_TESTS = os.path.join(HERE, "..", "spark")
sys.path.insert(0, SPARK_TESTS)

from spark_harness import run_spark  # noqa: E402
from standalone import standalone_cluster  # noqa: E402
from test_spark_differential import (  # noqa: E402
    INPUT_SERDES,
    OUTPUTS,
    REKEYED_UPDATES,
    random_input,
    topology,
)

from kspark.spark.internals.batch_output import DRIVER_RECORDS  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def per_key(records):
    """Each key's update sequence (tasks interleave in the sink, keys never span tasks)."""
    out = {}
    for key, value, ts in records:
        out.setdefault(key, []).append((value, ts))
    return out


@pytest.mark.long
def test_standalone_cluster_output_equals_local_output(spark, app_dir, bootstrap, topic):
    clicks = sessions_clicks(800, seed=5)
    for prefix in (f"{topic}.cluster.", f"{topic}.local.", f"{topic}.kill."):
        create(bootstrap, f"{prefix}clicks", 4)
        parts = produce(bootstrap, f"{prefix}clicks", clicks)
    result_path = os.path.join(app_dir, "cluster.json")
    with standalone_cluster(workers=2) as master:
        run = subprocess.run([sys.executable, os.path.join(SPARK_TESTS, "cluster_run.py"), "4",
                              result_path, os.path.join(app_dir, "cluster-ck"), master,
                              bootstrap, f"{topic}.cluster.", f"{topic}.kill."],
                             cwd=SPARK_TESTS, timeout=600, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(result_path) as f:
        cluster = json.load(f)
    assert cluster["executors"] == 2

    # file topics: as on local[2]
    local, _ = run_spark(spark, topology(False), random_input(4), OUTPUTS, INPUT_SERDES, app_dir,
                         batches=3, partitions=2, app_id="local-twin")
    for name in OUTPUTS:
        local_rows = [[repr(k), v, ts] for k, v, ts in local[name]]
        assert local_rows, name
        if name in REKEYED_UPDATES:  # a key's records come from several partitions: any order
            assert sorted(map(repr, cluster["outputs"][name])) == sorted(map(repr, local_rows))
            continue
        assert per_key(map(tuple, cluster["outputs"][name])) == per_key(map(tuple, local_rows))

    # Kafka to Kafka: the executors wrote every record, the driver none
    metrics = cluster["kafka_metrics"]
    assert metrics["process-total"] == len(clicks)
    assert metrics[DRIVER_RECORDS] == 0
    assert metrics["sink.transactions.committed"] > 0
    assert metrics.get("sink.transactions.skipped", 0) == 0  # no batch was replayed
    app = sessions_app(bootstrap, f"{topic}.local.", os.path.join(app_dir, "local-ck"), 300,
                       spark=spark)
    app.start()
    try:
        app.process_all_available()
        assert app.metrics()[DRIVER_RECORDS] == 0
    finally:
        app.stop()
    cluster_out = kafka_outputs(bootstrap, f"{topic}.cluster.")
    assert len(cluster_out["session-counts"]) > 20
    # every record the executors wrote is in the output topics, once
    assert metrics["sink.records.written"] == sum(len(v) for v in cluster_out.values())
    assert cluster_out == kafka_outputs(bootstrap, f"{topic}.local.")
    assert len(parts) == len(clicks)

    # an executor JVM killed mid-run: Spark runs its tasks again on the other executor or a new
    # one; the dead task's transaction is fenced by the next holder of its transactional id:
    # each result once
    assert len(cluster["killed_executor"]) == 1
    assert cluster["killed_executor"][0] not in cluster["executors_after"]
    assert cluster["kill_metrics"]["process-total"] == len(clicks)
    assert kafka_outputs(bootstrap, f"{topic}.kill.") == cluster_out
