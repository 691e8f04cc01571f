"""Exactly-once: a run killed at a random point and restarted from its checkpoint writes the same
output as an uninterrupted run; a different split into micro-batches gives the same final table."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from spark_harness import run_spark

from kspark import io, serdes
from kspark.examples.click_counter import generate_clicks
from kspark.spark import StreamsApp

pytestmark = [pytest.mark.spark, pytest.mark.slow]
HERE = os.path.dirname(__file__)


def _write_input(path: str, clicks: list, files: int) -> None:
    topic = io.memory(serdes.String(), serdes.Json())
    topic.path = path
    os.makedirs(path, exist_ok=True)
    topic.send_all(clicks, per_file=-(-len(clicks) // files))


def _run_in_process(spark, input_dir, output_dir, checkpoint):
    from restart_topologies import click_counter

    topology, src, dst = click_counter()
    app = StreamsApp(
        topology,
        "restart-app",
        {
            src: io.files(input_dir, format="kspark", max_files_per_trigger=1),
            dst: io.files(output_dir, format="jsonl"),
        },
        spark=spark,
        checkpoint_dir=checkpoint,
    )
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return io.files(output_dir).read_records()


def test_killed_and_restarted_run_equals_uninterrupted_run(spark, app_dir):
    clicks = list(generate_clicks(1200, users=9, seed=11))
    input_dir = os.path.join(app_dir, "in")
    _write_input(input_dir, clicks, files=12)
    expected = _run_in_process(
        spark, input_dir, os.path.join(app_dir, "out-ref"), os.path.join(app_dir, "ck-ref")
    )
    assert len(expected) > 12

    out_dir, checkpoint = os.path.join(app_dir, "out"), os.path.join(app_dir, "ck")
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.join(HERE, "app_process.py"),
            "restart_topologies:click_counter",
            input_dir,
            out_dir,
            checkpoint,
        ],
        cwd=HERE,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    # wait until some batches were written, then kill at a random moment
    deadline = time.time() + 240
    while time.time() < deadline:
        done = len(os.listdir(out_dir)) if os.path.isdir(out_dir) else 0
        if done >= 2 or proc.poll() is not None:
            break
        time.sleep(0.2)
    time.sleep(random.Random(5).uniform(0.0, 1.5))
    assert proc.poll() is None, "the first run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    partial = io.files(out_dir).read_records()
    assert len(partial) < len(expected)

    resumed = _run_in_process(spark, input_dir, out_dir, checkpoint)
    assert resumed == expected


def test_different_batch_split_gives_same_final_table(spark, app_dir):
    clicks = list(generate_clicks(600, users=5, seed=2))
    io_serdes = {"clicks": (serdes.String(), serdes.Json())}
    outs = {"click-counts-report": (serdes.String(), serdes.Long())}
    from kspark.examples.click_counter import topology

    finals = []
    for batches in (2, 5):
        out, _ = run_spark(
            spark,
            topology(),
            {"clicks": clicks},
            outs,
            io_serdes,
            app_dir,
            batches=batches,
            app_id=f"split-{batches}",
        )
        table = {}
        for key, value, _ts in out["click-counts-report"]:
            table[key] = value
        finals.append(table)
    assert finals[0] == finals[1]
    assert sum(finals[0].values()) <= 600 and len(finals[0]) == 5
