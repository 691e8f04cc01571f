"""The streaming DataFrame a StreamsApp runs: its sources as rows of the wire format
(:mod:`.wire`), the tick source when wall-clock time is needed, and one stateful stage per
sub-topology (:class:`.stage.StageProcessor`), grouped so that tasks spread over the shuffle
partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kspark.config import StreamsConfig
from kspark.io.files import FileTopic
from kspark.io.frame import FrameTopic
from kspark.io.kafka import KafkaTopic
from kspark.spark.internals.kafka_input import kafka_ranges_frame, kafka_source_frame
from kspark.spark.internals.kafka_source import kafka_input_frame
from kspark.spark.internals.row_schema import ROW_DDL
from kspark.spark.internals.wire import HEADERS, INPUT_TYPES
from kspark.topology.internals.plan import ExecutionPlan
from kspark.topology.topology import Topology

if TYPE_CHECKING:
    from kspark.spark.internals.task_sinks import TaskSinks

#: the tick source's interval, ms (``spark.kspark.tick.ms``)
DEFAULT_TICK_MS = 1000


def source_frame(spark: Any, topic: str, spec: Any, read_in_stage: bool,
                 parallelism: int | None, config: StreamsConfig,
                 kafka_reads: dict[str, dict[str, str]] | None = None) -> Any:
    """Rows of source ``topic`` at location ``spec``: a file topic read by kspark's file source
    (in the stages' tasks when ``read_in_stage``), a Kafka topic (range rows when
    ``kafka_reads`` has its options, see :func:`.kafka_input.kafka_stage_options`) or a
    streaming DataFrame with Kafka's columns, packed many records to a row."""
    if kafka_reads and topic in kafka_reads:
        return kafka_ranges_frame(spark, kafka_reads[topic])
    if isinstance(spec, FileTopic):
        # read in the stages: range rows made on the driver; else a read stage of its own
        reader = spark.readStream.format("kspark_file_ranges" if read_in_stage else "kspark_files")
        for k, v in spec.source_options(topic).items():
            reader = reader.option(k, v)
        reader = reader.option("handler", config.deserialization_handler)
        return reader.option("parallelism", str(parallelism or 1)).load()
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from kspark.spark.internals.wire import pack_stream

    if isinstance(spec, FrameTopic):
        from kspark.config import LOG_AND_CONTINUE
        from kspark.spark.internals.frame_source import frame_source_frame

        return frame_source_frame(spec, topic,
                                  config.deserialization_handler == LOG_AND_CONTINUE)
    if isinstance(spec, KafkaTopic):
        frame = kafka_source_frame(spark, spec, topic, config.task_timeout_ms)
    elif isinstance(spec, DataFrame) and spec.isStreaming:
        frame = kafka_input_frame(spec)  # a streaming DataFrame of Kafka's columns
    else:
        raise TypeError(f"topic {topic!r}: unsupported location {spec!r}")
    # many records to a row through the shuffle and into the stages' Python workers (which
    # take several microseconds per row); the file source packs as it reads
    typed = [F.col(c).cast(t).alias(c) for c, t in INPUT_TYPES]
    return frame.select(*typed, HEADERS).mapInArrow(pack_stream, ROW_DDL)


def query_frame(spark: Any, topology: Topology, plan: ExecutionPlan, config: StreamsConfig,
                sources: list[Any], *, ticks: bool, spark_partitions: int,
                changelogs: dict[str, str],
                kafka_reads: dict[str, dict[str, str]] | None = None,
                task_sinks: TaskSinks | None = None) -> Any:
    """The stages' output rows over the union of ``sources`` (and ticks): one
    ``transformWithStateInPandas`` per sub-topology in ``plan``'s order, over
    ``spark_partitions`` shuffle partitions; ``changelogs`` maps the stores written out to
    their changelog topics, ``kafka_reads`` the Kafka topics the stages read to their source
    options, ``task_sinks`` the sink topics each stage's tasks write themselves."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    from kspark.spark.internals.stage import StageProcessor
    from kspark.spark.internals.task_placement import task_group_column

    tasks = plan.tasks
    frames = list(sources)
    if ticks:
        interval = config.extra.get("spark.kspark.tick.ms", DEFAULT_TICK_MS)
        frames.append(
            spark.readStream.format("kspark_ticks")
            .option("interval_ms", str(interval))
            .option("tasks", ",".join(str(i) for i in range(tasks)))
            .load()
        )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    global_topics = topology.global_topics()
    if global_topics:
        # every task keeps a global store whole: each row of its topic goes to every task
        every = F.array(*[F.lit(p) for p in range(tasks)])
        copies = F.when(F.col("topic").isin(global_topics), every).otherwise(
            F.array(F.col("partition").cast("int")))
        frame = frame.withColumn("partition", F.explode(copies))
    blob = cloudpickle.dumps(topology)
    topic_partitions = dict(plan.partitions)
    spark.conf.set("spark.sql.shuffle.partitions", str(spark_partitions))
    for index, sub in enumerate(plan.stages):
        later = {t for s in plan.stages[index + 1:] for t in s.source_topics}
        # tasks spread evenly over the shuffle partitions, which run side by side
        group = task_group_column(F.col("partition"), tasks, spark_partitions)
        frame = frame.withColumn("task_group", group)
        frame = frame.groupBy("task_group").transformWithStateInPandas(
            StageProcessor(blob, sub.id, config, topic_partitions, changelogs, kafka_reads,
                           tasks, frozenset(later.intersection(global_topics)),
                           task_sinks and task_sinks.for_stage(
                               sub, changelogs, config.dead_letter_topic,
                               topology.has_topic_extractors()),
                           spark_partitions),
            ROW_DDL,
            "Append",
            "None",
        )
    return frame
