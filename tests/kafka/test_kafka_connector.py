"""Spark's own Kafka connector as a StreamsApp's source (``io.kafka(..., source="spark")``): the
sessions app from Kafka to Kafka equals the test driver and resumes from its checkpoint; without
the connector, ``source="spark"`` is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from kafka_app_process import sessions_app
from kafka_util import create, driver_outputs, kafka_outputs, produce, sessions_clicks

from kspark import io
from kspark.spark.internals.kafka_connector import has_connector

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def prefix(topic):
    """This test's prefix for Kafka topic names and the app id (one broker for the run)."""
    return f"{topic}."


def _run(app):
    app.start()
    try:
        app.process_all_available()
        progress = [p for p in app.query.recentProgress if p["numInputRows"]]
        metrics = app.metrics()
    finally:
        app.stop()
    return progress, metrics


def test_sessions_via_spark_connector_equal_the_test_driver_and_resume(spark, app_dir,
                                                                       bootstrap, prefix):
    assert has_connector(spark), "local_spark() could not load Spark's Kafka connector"
    create(bootstrap, f"{prefix}clicks", 4)
    # of yesterday: the broker's retention (7 days) deletes older records at its checks
    clicks = sessions_clicks(800, seed=6, base_ms=int(time.time() * 1000) - 86_400_000)
    half = 500
    parts = produce(bootstrap, f"{prefix}clicks", clicks[:half])
    checkpoint = os.path.join(app_dir, "ck")
    first, metrics = _run(sessions_app(bootstrap, prefix, checkpoint, 200, spark=spark,
                                       source="spark"))
    # Spark's connector read it (kspark_kafka's description names its own class)
    assert all(p["sources"][0]["description"].startswith("KafkaV2") for p in first)
    assert len(first) >= 3 and metrics["process-total"] == half
    assert kafka_outputs(bootstrap, prefix) == driver_outputs(clicks[:half], parts)
    end = json.loads(first[-1]["sources"][0]["endOffset"])
    assert sum(end[f"{prefix}clicks"].values()) == half

    parts += produce(bootstrap, f"{prefix}clicks", clicks[half:])
    # "latest" applies to a query without a checkpoint only: this one resumes where it stopped
    again, metrics = _run(sessions_app(bootstrap, prefix, checkpoint, 200, spark=spark,
                                       source="spark", starting_offsets="latest"))
    assert json.loads(again[0]["sources"][0]["startOffset"]) == end
    assert sum(p["numInputRows"] for p in again) == len(clicks) - half
    assert metrics["process-total"] == len(clicks) - half
    assert kafka_outputs(bootstrap, prefix) == driver_outputs(clicks, parts)


def test_an_unknown_source_is_refused(bootstrap):
    with pytest.raises(ValueError, match="source must be one of auto, kspark, spark"):
        io.kafka(bootstrap, "clicks", source="native")


def test_source_spark_without_the_connector_is_a_clear_error(bootstrap):
    """A session of its own (a JVM without the connector's jars: the shared one has them)."""
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession

        from kspark import io
        from kspark.spark.internals.kafka_connector import ConnectorMissing, uses_connector
        from kspark.spark.internals.kafka_input import kafka_source_frame
        from kspark.spark.session import prepare_python_env

        prepare_python_env()
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "512m").getOrCreate())
        assert not uses_connector(spark, "auto")  # auto falls back to kspark_kafka
        try:
            kafka_source_frame(spark, io.kafka({bootstrap!r}, "clicks", source="spark"), "clicks")
        except ConnectorMissing as exc:
            print("ERROR:", exc)
        spark.stop()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.split("ERROR:", 1)[-1]
    assert "ERROR:" in done.stdout
    assert "Spark's Kafka connector" in message and "is not loaded in this Spark session" in message
    assert "spark.jars.packages" in message and "source='kspark'" in message
