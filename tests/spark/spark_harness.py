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


def run_through(app: StreamsApp) -> StreamsApp:
    """Start ``app``, process all its input, stop it (also on failure); ``app``."""
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return app


def run_driver(
    topology: Topology,
    inputs: dict[str, Records],
    outputs: dict[str, tuple],
    serdes_in: dict[str, tuple],
    config: dict | None = None,
    metrics: dict[str, int] | None = None,
) -> dict[str, Records]:
    """Pipe each input topic's records (topics interleaved in the given order) and read all
    outputs as ``(key, value, timestamp)`` lists; the driver's metrics into ``metrics`` if
    given."""
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
        if metrics is not None:
            metrics.update(driver.metrics())
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


def final_table(records: Records) -> dict[Any, Any]:
    """The last value of each key of a table's update stream (a ``None`` value deletes)."""
    table: dict[Any, Any] = {}
    for key, value, _ in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def batch_chunks(records: Records, batches: int) -> list[Records]:
    """``records`` cut as :func:`run_spark` cuts a topic into its micro-batches' files."""
    per_file = max(1, -(-len(records) // batches))
    return [records[i:i + per_file] for i in range(0, len(records), per_file)]


def spark_order(inputs: dict[str, Records], batches: int, first: tuple[str, ...] = (),
                keep: Any = None) -> list[tuple[str, Any, Any, int]]:
    """The order in which :func:`run_spark` processes ``inputs`` in one task: micro-batch by
    micro-batch, the records of ``first`` (global stores' topics) ahead, then the topics
    merged as Kafka Streams' partition group merges them (the topic whose next record has the
    smallest timestamp first; ties to the topic first by name). ``keep(topic, record)``: the
    records of the task (default: all, one partition)."""
    import heapq

    chunks = {t: [[r for r in c if keep is None or keep(t, r)] for c in batch_chunks(r, batches)]
              for t, r in inputs.items()}
    order: list[tuple[str, Any, Any, int]] = []
    for b in range(max((len(c) for c in chunks.values()), default=0)):
        now = {t: c[b] for t, c in chunks.items() if b < len(c) and c[b]}
        for topic in sorted(t for t in now if t in first):
            order.extend((topic, *r) for r in now.pop(topic))
        heads = [(records[0][2], topic, 0) for topic, records in sorted(now.items())]
        heapq.heapify(heads)
        while heads:
            _, topic, i = heapq.heappop(heads)
            order.append((topic, *now[topic][i]))
            if i + 1 < len(now[topic]):
                heapq.heappush(heads, (now[topic][i + 1][2], topic, i + 1))
    return order


def run_driver_in_order(topology: Topology, order: list[tuple[str, Any, Any, int]],
                        outputs: dict[str, tuple], serdes_in: dict[str, tuple],
                        config: dict | None = None) -> dict[str, Records]:
    """Pipe ``(topic, key, value, timestamp)`` records in the given order; read all outputs."""
    with TopologyTestDriver(topology, config=config) as driver:
        pipes = {t: driver.create_input_topic(t, *serdes_in[t]) for t in serdes_in}
        for topic, k, v, ts in order:
            pipes[topic].pipe_input(k, v, ts)
        result = {}
        for topic, (ks, vs) in outputs.items():
            out = driver.create_output_topic(topic, ks, vs)
            result[topic] = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        return result
