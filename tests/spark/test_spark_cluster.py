"""The same app on a Spark standalone cluster (a master and two workers started from pyspark's
own distribution: each its own JVM with its own Python workers) gives the same output as on the
shared ``local[2]`` session."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from spark_harness import run_spark
from standalone import standalone_cluster
from test_spark_differential import INPUT_SERDES, OUTPUTS, random_input, topology

pytestmark = [pytest.mark.spark, pytest.mark.slow]
HERE = os.path.dirname(__file__)


def per_key(records):
    """Each key's update sequence (tasks interleave in the sink, keys never span tasks)."""
    out = {}
    for key, value, ts in records:
        out.setdefault(key, []).append((value, ts))
    return out


def test_standalone_cluster_output_equals_local_output(spark, app_dir):
    result_path = os.path.join(app_dir, "cluster.json")
    with standalone_cluster(workers=2) as master:
        run = subprocess.run([sys.executable, os.path.join(HERE, "cluster_run.py"), "4",
                              result_path, os.path.join(app_dir, "cluster-ck"), master],
                             cwd=HERE, timeout=600, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(result_path) as f:
        cluster = json.load(f)
    assert cluster["executors"] == 2
    local, _ = run_spark(spark, topology(False), random_input(4), OUTPUTS, INPUT_SERDES, app_dir,
                         batches=3, partitions=2, app_id="local-twin")
    for topic in OUTPUTS:
        local_rows = [[repr(k), v, ts] for k, v, ts in local[topic]]
        assert local_rows, topic
        assert per_key(map(tuple, cluster["outputs"][topic])) == per_key(map(tuple, local_rows))
