"""The Processor API on Spark: same output as the test driver, state across batches."""

from __future__ import annotations

import pytest
from spark_harness import run_driver, run_spark

from kspark import serdes
from kspark.examples.click_counter import generate_clicks, topology

pytestmark = pytest.mark.spark


def test_click_counter_with_stream_time_punctuator_matches_driver(spark, app_dir):
    clicks = list(generate_clicks(400, users=7, seed=3))
    io_serdes = {"clicks": (serdes.String(), serdes.Json())}
    outs = {"click-counts-report": (serdes.String(), serdes.Long())}
    expected = run_driver(topology(), {"clicks": clicks}, outs, io_serdes)
    actual, app = run_spark(
        spark, topology(), {"clicks": clicks}, outs, io_serdes, app_dir, batches=4
    )
    assert expected["click-counts-report"], "the punctuator should have reported"
    assert actual == expected
    metrics = app.metrics()
    assert metrics["process-total"] == 400
    assert metrics["batches"] >= 4
