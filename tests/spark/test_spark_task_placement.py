"""Tasks run side by side: Spark's hash partitioning of the stages' grouping column gives each
task a shuffle partition of its own (grouping by the task number would not)."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F
from spark_harness import run_driver, run_through

from kspark.spark.internals.task_placement import spark_hash_int, task_group_column

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


@pytest.mark.parametrize("tasks,partitions", [(4, 2), (6, 4), (5, 1)])
def test_tasks_spread_evenly_over_fewer_shuffle_partitions(spark, tasks, partitions):
    frame = spark.range(tasks).select(F.col("id").cast("int").alias("partition"))
    group = task_group_column(F.col("partition"), tasks, partitions)
    rows = frame.select(
        "partition", group.alias("group"),
        F.pmod(F.hash(group), F.lit(partitions)).alias("shuffle"),
    ).collect()
    for r in rows:
        assert r["shuffle"] == r["partition"] % partitions
        assert r["group"] % tasks == r["partition"]


def _session_count_topology(value_serde):
    """Session counts (gap 100 ms, no grace) per String key of topic "in" into "out"."""
    from kspark import SessionWindows, StreamsBuilder, serdes

    builder = StreamsBuilder()
    (
        builder.stream("in", serdes.String(), value_serde)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 0))
        .count()
        .to_stream()
        .to("out", serdes.SessionWindowed(serdes.String()), serdes.Long())
    )
    return builder.build()


def test_several_tasks_per_spark_partition_keep_their_own_state_across_a_restart(spark, app_dir):
    """Four tasks on two Spark partitions give each task's own results (the final sessions of a
    driver fed that partition's records); a restart asking for one partition keeps the
    checkpoint's two."""
    import random

    from kspark import io, serdes
    from kspark.hashing import kafka_partition
    from kspark.spark import StreamsApp

    topology = _session_count_topology(serdes.Long())
    rng = random.Random(5)
    records = [(f"k{rng.randrange(12)}", 1, t * 7 + rng.randrange(5)) for t in range(300)]
    source = io.memory(serdes.String(), serdes.Long(), partitions=4, max_files_per_trigger=1)
    out = io.memory(serdes.SessionWindowed(serdes.String()), serdes.Long())

    def run(records, partitions):
        source.send_all(records)
        return run_through(StreamsApp(
            topology, "placement", {"in": source, "out": out}, spark=spark,
            config={"spark.kspark.partitions": partitions},
            checkpoint_dir=os.path.join(app_dir, "placement")))

    first = run(records[:150], 2)
    assert first.spark_partitions == 2 and first.task_count == 4
    second = run(records[150:], 1)
    assert second.spark_partitions == 2  # the checkpoint's
    # per task: a driver fed the records of its partition, in order
    expected = {}
    for task in range(4):
        mine = [r for r in records if kafka_partition(r[0].encode(), 4) == task]
        got = run_driver(topology, {"in": mine}, {"out": (serdes.SessionWindowed(serdes.String()),
                                                          serdes.Long())},
                         {"in": (serdes.String(), serdes.Long())})["out"]
        for key, value, _ in got:
            expected[key] = value
    final = {}
    for key, value, _ in out.records():
        final[key] = value
    live = {k: v for k, v in expected.items() if v is not None}
    assert {k: v for k, v in final.items() if v is not None} == live
    assert len(live) > 20


def _session_counts(spark, app_dir, name, config, files):
    """Final session counts of a parquet file topic (4 partitions) run on Spark with
    ``config``."""
    from kspark import io, serdes
    from kspark.spark import StreamsApp

    source = io.files(files, format="parquet", key_field="key", timestamp_field="ts",
                      value_field="value", partitions=4, max_files_per_trigger=2)
    out = io.memory(serdes.SessionWindowed(serdes.String()), serdes.Long())
    app = StreamsApp(_session_count_topology(serdes.Json()), name, {"in": source, "out": out},
                     spark=spark, config=config, checkpoint_dir=os.path.join(app_dir, name))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return app, out.records()


def test_file_sources_read_in_the_stage_or_through_the_shuffle_give_the_same_output(
    spark, app_dir
):
    """The stages' tasks reading the files themselves (file rows) and a read stage shuffling
    the records to them give the same update stream, over files of several row groups."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = os.path.join(app_dir, "files")
    os.makedirs(files)
    rng = np.random.default_rng(3)
    for i in range(3):
        n = 3000
        pq.write_table(pa.table({
            "key": [f"k{k}" for k in rng.integers(0, 40, n)],
            "ts": np.sort(rng.integers(i * 20_000, (i + 1) * 20_000, n)).astype(np.int64),
            "value": list(range(n)),
        }), os.path.join(files, f"part-{i}.parquet"), row_group_size=700)
    runs = {}
    for setting in ("true", "false"):
        app, records = _session_counts(spark, app_dir, f"read-{setting}",
                                       {"spark.kspark.files.read.in.stage": setting}, files)
        assert app._read_files_in_stage() is (setting == "true")
        runs[setting] = sorted(records, key=lambda r: (str(r[0]), r[2], str(r[1])))
    assert len(runs["true"]) > 500
    assert runs["true"] == runs["false"]


def test_read_in_stage_setting_is_checked(spark, app_dir):
    with pytest.raises(ValueError,
                       match=r"spark.kspark.files.read.in.stage must be one of auto, true, false"):
        _session_counts(spark, app_dir, "read-bad", {"spark.kspark.files.read.in.stage": "yes"},
                        app_dir)
