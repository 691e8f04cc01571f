"""A Kafka topic location (:class:`~kspark.io.kafka.KafkaTopic`) as a streaming DataFrame in
kspark's input layout, read by kspark's own source ``kspark_kafka`` or by Spark's connector as
the location's ``source`` setting picks (:func:`.kafka_connector.uses_connector`).
"""

from __future__ import annotations

from typing import Any

from kspark.io.kafka import KafkaTopic
from kspark.kafka.admin import matching_topics, partition_counts
from kspark.spark.internals.kafka_connector import connector_reader, uses_connector
from kspark.spark.internals.kafka_source import (
    IN_STAGE_OPTION,
    TIMEOUT_OPTION,
    TOPIC_OPTION,
    kafka_input_frame,
)


def kafka_stage_options(spark: Any, location: KafkaTopic, topic: str, in_stage: bool,
                        timeout_ms: int | None = None) -> dict[str, str] | None:
    """The options of ``kspark_kafka`` giving range rows of ``topic`` for the stages to read
    (``None``: its records are read by a source stage, as ``in_stage`` is off or Spark's
    connector reads the topic)."""
    if not in_stage or uses_connector(spark, location.source):
        return None
    options = location.source_options(topic)
    if timeout_ms is not None:
        options[TIMEOUT_OPTION] = str(timeout_ms)
    options[IN_STAGE_OPTION] = "true"
    options[TOPIC_OPTION] = topic
    return options


def kafka_ranges_frame(spark: Any, options: dict[str, str]) -> Any:
    """The range rows of a Kafka topic (options of :func:`kafka_stage_options`), made on the
    driver (:mod:`~kspark.spark.internals.kafka_ranges`)."""
    reader = spark.readStream.format("kspark_kafka_ranges")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def kafka_source_frame(spark: Any, location: KafkaTopic, topic: str,
                       timeout_ms: int | None = None) -> Any:
    """The records of ``location`` with every row named ``topic`` (the topology's name);
    kspark's source waits up to ``timeout_ms`` for an unreachable cluster."""
    options = location.source_options(topic)
    if timeout_ms is not None:
        options[TIMEOUT_OPTION] = str(timeout_ms)
    if uses_connector(spark, location.source):
        counts = None  # the connector needs every partition in JSON starting offsets
        if isinstance(location.starting_offsets, dict):
            counts = (
                matching_topics(location.bootstrap_servers, location.pattern, location.config)
                if location.pattern is not None
                else partition_counts(location.bootstrap_servers, location.kafka_topics(topic),
                                      location.config)
            )
        reader = connector_reader(spark, options, counts)
    else:
        reader = spark.readStream.format("kspark_kafka")
        for key, value in options.items():
            reader = reader.option(key, value)
    return kafka_input_frame(reader.load(), topic)
