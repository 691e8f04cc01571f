"""Run the same topology and input on the test driver and on Spark, for differential tests."""

from __future__ import annotations

import os
from typing import Any

from kspark import io
from kspark.serdes import Serde
from kspark.spark import StreamsApp
from kspark.testing import TopologyTestDriver
from kspark.topology import Topology

Records = list[tuple[Any, Any, int]]


def run_driver(
    topology: Topology,
    inputs: dict[str, Records],
    outputs: dict[str, tuple],
    serdes_in: dict[str, tuple],
    config: dict | None = None,
) -> dict[str, Records]:
    """Pipe each input topic's records (topics interleaved in the given order) and read all
    outputs as ``(key, value, timestamp)`` lists."""
    with TopologyTestDriver(topology, config=config) as driver:
        for topic, records in inputs.items():
            ks, vs = serdes_in[topic]
            pipe = driver.create_input_topic(topic, ks, vs)
            for k, v, ts in records:
                pipe.pipe_input(k, v, ts)
        result = {}
        for topic, (ks, vs) in outputs.items():
            out = driver.create_output_topic(topic, ks, vs)
            result[topic] = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        return result


def run_spark(
    spark: Any,
    topology: Topology,
    inputs: dict[str, Records],
    outputs: dict[str, tuple[Serde, Serde]],
    serdes_in: dict[str, tuple[Serde, Serde]],
    app_dir: str,
    batches: int = 3,
    partitions: int = 1,
    config: dict | None = None,
    app_id: str = "diff",
) -> tuple[dict[str, Records], StreamsApp]:
    """Run ``topology`` on Spark with each input split into ``batches`` micro-batches."""
    topics: dict[str, Any] = {}
    for topic, records in inputs.items():
        ks, vs = serdes_in[topic]
        src = io.memory(ks, vs, partitions=partitions, max_files_per_trigger=1)
        per_file = max(1, -(-len(records) // batches))
        src.send_all(records, per_file=per_file)
        topics[topic] = src
    sinks = {t: io.memory(ks, vs) for t, (ks, vs) in outputs.items()}
    topics.update(sinks)
    app = StreamsApp(
        topology,
        app_id,
        topics,
        spark=spark,
        config=config,
        checkpoint_dir=os.path.join(app_dir, app_id),
    )
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return {t: s.records() for t, s in sinks.items()}, app
