"""Tasks run side by side: Spark's hash partitioning of the stages' grouping column gives each
task a shuffle partition of its own (grouping by the task number would not)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from kspark.spark.stage import spark_hash_int, task_group_column

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("tasks", [2, 4, 6, 16])
def test_each_task_hashes_to_its_own_shuffle_partition(spark, tasks):
    frame = spark.range(tasks).select(F.col("id").cast("int").alias("partition"))
    group = task_group_column(F.col("partition"), tasks)
    rows = frame.select(
        "partition",
        group.alias("group"),
        F.pmod(F.hash(group), F.lit(tasks)).alias("shuffle"),
        F.hash(F.col("partition")).alias("plain_hash"),
    ).collect()
    assert sorted(r["shuffle"] for r in rows) == list(range(tasks))
    for r in rows:
        assert r["shuffle"] == r["partition"]
        assert r["group"] % tasks == r["partition"]
        assert spark_hash_int(r["partition"]) == r["plain_hash"]
