"""StreamsApp: a Topology run as one Spark Structured Streaming query."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from kspark.config import StreamsConfig
from kspark.errors import StreamsError, TopologyError
from kspark.io.files import FileTopic
from kspark.io.kafka import KafkaTopic, required_acls
from kspark.io.location import TopicLocation
from kspark.processor.punctuation import PunctuationType
from kspark.runtime.metrics import Metrics
from kspark.spark.internals.failures import as_kspark_error, kspark_errors
from kspark.spark.internals.live_metrics import LiveMetrics, MetricsReport
from kspark.state.internals.changelog import changelog_topic
from kspark.topology.internals.plan import ExecutionPlan
from kspark.topology.topology import Topology

if TYPE_CHECKING:
    from kspark.kafka.acls import AclNeed
    from kspark.spark.internals.task_sinks import TaskSinks
    from kspark.spark.prometheus import MetricsEndpoint

log = logging.getLogger("kspark.app")


#: most Spark partitions per stage for which ``auto`` reads file sources in the stages' tasks
READ_IN_STAGE_PARTITIONS = 4


def _default_checkpoint(application_id: str) -> str:
    return os.path.join(tempfile.gettempdir(), "kspark-state", application_id)


class StreamsApp:
    """Runs ``topology`` on Spark. ``topics`` maps every external topic of the topology to where
    it lives (``kspark.io.files(...)``, ``kspark.io.memory(...)``, or a DataFrame with the columns
    of Spark's Kafka source for a source topic)."""

    def __init__(
        self,
        topology: Topology,
        application_id: str,
        topics: dict[str, Any],
        spark: Any = None,
        config: StreamsConfig | dict[str, Any] | None = None,
        checkpoint_dir: str | None = None,
        trigger_interval_ms: int | None = None,
        master: str = "local[2]",
    ) -> None:
        topology.validate()
        self.topology = topology
        self.application_id = application_id
        self.config = StreamsConfig.of(config, application_id=application_id)
        self.config.application_id = application_id
        self.topics = dict(topics)
        self.checkpoint_dir = checkpoint_dir or _default_checkpoint(application_id)
        self.trigger_interval_ms = trigger_interval_ms
        self._spark = spark
        self._master = master
        self._query: Any = None
        self._live = LiveMetrics()
        self._lock = threading.Lock()
        self._connect = False
        self._ticks = False
        self._spark_partitions: int | None = None
        self._plan: ExecutionPlan | None = None
        self._add_changelog_locations()
        self._add_feedback_locations()
        self._check_topics()

    # -- planning ------------------------------------------------------------------------------
    @property
    def plan(self) -> ExecutionPlan:
        """Stages, tasks and every topic's partition count, from the topics' locations (planned
        again at :meth:`start`, when Kafka topics have been checked or created)."""
        if self._plan is None:
            self._plan = ExecutionPlan.of(self.topology, {
                t: spec.num_partitions if isinstance(spec, TopicLocation) else None
                for t, spec in self.topics.items()
            })
        return self._plan

    def _check_topics(self) -> None:
        needed = self.topology.external_source_topics() + self.topology.external_sink_topics()
        if self.config.dead_letter_topic:
            needed.append(self.config.dead_letter_topic)
        missing = [t for t in needed if t not in self.topics]
        if missing:
            raise TopologyError(
                f"StreamsApp {self.application_id!r}: no location given for "
                f"topics {missing}; pass them in topics={{...}} (kspark.io)"
            )

    def _changelog_topics(self) -> dict[str, str]:
        """Logged stores whose changelog topic has a location in ``topics``: store -> topic."""
        out = {}
        for name, builder in self.topology.store_builders.items():
            topic = changelog_topic(self.application_id, name)
            if builder.logging and topic in self.topics:
                out[name] = topic
        return out

    def _add_changelog_locations(self) -> None:
        """With ``state.changelog.dir``: a file topic for each logged store's changelog that
        ``topics`` does not place (read-only source stores keep no changelog)."""
        if not self.config.changelog_dir:
            return
        tasks = self.plan.tasks
        for name, builder in self.topology.store_builders.items():
            topic = changelog_topic(self.application_id, name)
            if builder.logging and name not in self.topology.source_stores:
                path = os.path.join(self.config.changelog_dir, topic)
                if topic not in self.topics:
                    os.makedirs(path, exist_ok=True)  # readers may start before the first write
                    self.topics[topic] = FileTopic(path, format="kspark", partitions=tasks)
        self._plan = None  # planned again with the changelogs' locations

    def _add_feedback_locations(self) -> None:
        """A file topic under the checkpoint directory for each feedback topic (a foreign-key
        join's registrations): written by the stage of one micro-batch, read by an earlier
        stage in the next, exactly once as every file topic."""
        for topic in sorted(self.topology.feedback_topics):
            if topic not in self.topics:
                path = os.path.join(self.checkpoint_dir, "internal", topic)
                os.makedirs(path, exist_ok=True)
                self.topics[topic] = FileTopic(path, format="kspark",
                                               partitions=self.plan.partitions_of(topic))
        self._plan = None

    def _source_topics(self) -> list[str]:
        """The topics the query reads: the external sources and the feedback topics."""
        return [*self.topology.external_source_topics(), *sorted(self.topology.feedback_topics)]

    def _needs_ticks(self) -> bool:
        """Whether any processor schedules wall-clock punctuation (found by initialising the
        tasks once on the driver) or idle closing is on."""
        if self.config.close_on_idle_ms:
            return True
        from kspark.runtime.task import Task

        for sub in self.plan.stages:
            task = Task(
                self.topology, sub, 0, config=self.config, metrics=Metrics(), wall_clock=lambda: 0
            )
            task.init()
            if task.next_wall_clock_due() is not None:
                return True
        return False

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from kspark.spark.session import local_spark

            self._spark = local_spark(self._master)
        else:
            from kspark.spark.session import prepare_python_env, register_data_sources

            prepare_python_env()
            register_data_sources(self._spark)
        return self._spark

    @property
    def master(self) -> str:
        """The Spark master of the session this app starts when given none."""
        return self._master

    @property
    def task_count(self) -> int:
        """Tasks per sub-topology (:attr:`ExecutionPlan.tasks`)."""
        return self.plan.tasks

    @property
    def spark_partitions(self) -> int:
        """Spark partitions (state store instances) per stage: ``spark.kspark.partitions`` if
        set, else as many as the cluster runs at once (``defaultParallelism``) up to one per
        task. Each Spark task of a stage runs its tasks one after another; fewer, larger Spark
        tasks save the fixed cost of each (state store load and commit, Python worker set-up).
        A restart keeps the number its checkpoint was started with, as Spark does."""
        if self._spark_partitions is None:
            from kspark.spark.internals.query import APP_INFO, _local, load_app_info

            tasks = self.task_count
            setting = self.config.extra.get("spark.kspark.partitions")
            local = _local(self.checkpoint_dir)
            if local is not None and os.path.isfile(os.path.join(local, APP_INFO)):
                try:
                    info = load_app_info(local)
                except StreamsError:  # another format: start() says whether it can resume
                    info = {}
                if info.get("tasks") == tasks and info.get("spark_partitions"):
                    setting = info["spark_partitions"]
            if setting is None:
                setting = self._parallelism or tasks
            self._spark_partitions = max(1, min(int(setting), tasks))
        return self._spark_partitions

    def _read_files_in_stage(self) -> bool:
        """Whether the stages' tasks read file sources themselves (``spark.kspark.files.read.in.
        stage``: ``auto``, the default, with at most :data:`READ_IN_STAGE_PARTITIONS` Spark
        partitions per stage, or ``true``/``false``). Every Spark task of the first stage then
        decodes each file of the batch and keeps its tasks' records, instead of one read task
        decoding it and Spark shuffling the records: cheaper on a few cores, wasteful on many."""
        setting = self.config.extra.get("spark.kspark.files.read.in.stage", "auto")
        if setting == "auto":
            return self.spark_partitions <= READ_IN_STAGE_PARTITIONS
        return bool(setting == "true")

    @functools.cached_property
    def _parallelism(self) -> int | None:
        """Tasks the cluster runs at once (Spark's default parallelism; ``None`` if unknown)."""
        try:
            return int(self.spark.sparkContext.defaultParallelism)
        except (AttributeError, NotImplementedError):  # Spark Connect: no SparkContext
            return None

    def build_query_frame(self, task_sinks: TaskSinks | None = None) -> Any:
        """The streaming DataFrame of output rows (before the sink), its stages writing
        ``task_sinks`` themselves."""
        from kspark.spark.internals.query_frame import query_frame, source_frame

        read_in_stage = self._read_files_in_stage()
        kafka_reads = self._kafka_reads()
        global_topics = self.topology.global_topics()
        # a global store's topic is read by every task whole: read once, then copied to them
        sources = [
            source_frame(self.spark, topic, self.topics[topic],
                         read_in_stage and topic not in global_topics, self._parallelism,
                         self.config, kafka_reads)
            for topic in self._source_topics()
        ]
        self._ticks = self._needs_ticks()
        return query_frame(self.spark, self.topology, self.plan, self.config, sources,
                           ticks=self._ticks, spark_partitions=self.spark_partitions,
                           changelogs=self._changelog_topics(), kafka_reads=kafka_reads,
                           task_sinks=task_sinks)

    def _kafka_reads(self) -> dict[str, dict[str, str]]:
        """Source topics on Kafka whose records the stages' tasks read themselves
        (``spark.kspark.kafka.read.in.stage``, on by default), with their source's options:
        each partition's records go from Kafka straight to the task that processes them."""
        from kspark.spark.internals.kafka_input import kafka_stage_options

        in_stage = self.config.extra.get("spark.kspark.kafka.read.in.stage", "true") == "true"
        reads = {}
        global_topics = self.topology.global_topics()
        for topic in self.topology.external_source_topics():
            if topic in global_topics:
                continue  # read once and copied to every task (see build_query_frame)
            spec = self.topics[topic]
            if isinstance(spec, KafkaTopic):
                options = kafka_stage_options(self.spark, spec, topic, in_stage,
                                              self.config.task_timeout_ms)
                if options is not None:
                    reads[topic] = options
        return reads

    # -- running -------------------------------------------------------------------------------
    def start(self) -> StreamsApp:
        """Start the query (resuming from the checkpoint directory if it holds one)."""
        if self._query is not None:
            raise StreamsError(f"StreamsApp {self.application_id!r} is already started")
        self._plan = None
        from kspark.spark.internals.batch_writer import (
            BatchWriter,
            read_figures,
            with_partition_writers,
        )
        from kspark.spark.internals.jvm_stderr import quiet_jvm_console
        from kspark.spark.internals.warm_up import start_python_workers
        from kspark.spark.session import configure_session, is_connect

        connect = is_connect(self.spark)
        configure_session(self.spark)
        if connect:  # figures a Connect server left for an earlier app object are not ours
            read_figures(self.checkpoint_dir)
        else:
            quiet_jvm_console(self.spark.sparkContext._gateway)
            start_python_workers(self.spark)  # while the driver prepares and plans the query
        for topic, spec in self.topics.items():
            if isinstance(spec, TopicLocation):  # e.g. a Kafka topic checks or creates itself
                spec.prepare(self, topic)
        self._plan = None  # Kafka topics now know their partitions
        sinks = self._sink_locations()
        task_sinks, rest = None, sinks
        if not connect and self.config.extra.get("spark.kspark.sink.in.stage", "true") == "true":
            from kspark.spark.internals.task_sinks import stage_sinks

            task_sinks, rest = stage_sinks(sinks, self.topology, self.plan,
                                           self.spark_partitions)
        frame = self.build_query_frame(task_sinks)
        from kspark.spark.internals.query import check_checkpoint, write_app_info

        check_checkpoint(self)
        write_app_info(self)
        query_name = self.application_id.replace("-", "_")
        refused = {t: s.not_over_connect for t, s in sinks.items() if s.not_over_connect}
        if connect and refused:
            raise StreamsError(
                f"StreamsApp {self.application_id!r}: over Spark Connect the server writes the "
                f"micro-batches, and sinks {sorted(refused)} cannot be written there ("
                f"{'; '.join(sorted(set(refused.values())))}): write them to kspark.io.files "
                f"or kspark.io.kafka")
        batches = BatchWriter(sinks, query_name, self.checkpoint_dir,
                              None if connect else self._record_figures,
                              None if connect else self._run_id, writes_in_query=not connect)
        self._connect = connect
        if not connect:
            frame = with_partition_writers(frame, rest)
        writer = (
            frame.writeStream.foreachBatch(batches)
            .option("checkpointLocation", os.path.join(self.checkpoint_dir, "query"))
            .queryName(query_name)
        )
        if self.trigger_interval_ms:
            writer = writer.trigger(processingTime=f"{self.trigger_interval_ms} milliseconds")
        with kspark_errors(self.application_id, self.checkpoint_dir):
            self._query = writer.start()
        return self

    def _record_figures(self, figures: dict[str, Metrics], took_ms: float) -> None:
        with self._lock:
            self._live.record(figures, took_ms)

    def _refresh_figures(self) -> None:
        """Over Spark Connect: take in the figures the server's batch writer left."""
        if self._connect:
            from kspark.spark.internals.batch_writer import read_figures

            for figures, took_ms in read_figures(self.checkpoint_dir):
                self._record_figures(figures, took_ms)

    def _sink_locations(self) -> dict[str, TopicLocation]:
        """The locations the app writes: output topics, changelogs and the dead-letter topic."""
        names = [*self.topology.external_sink_topics(), *self._changelog_topics().values(),
                 *sorted(self.topology.feedback_topics)]
        if self.topology.has_topic_extractors():  # any of the app's other topics may be chosen
            sources = set(self._source_topics())
            names += [t for t, spec in self.topics.items() if isinstance(spec, TopicLocation)
                      and t not in sources and t not in names]
        if self.config.dead_letter_topic:
            names.append(self.config.dead_letter_topic)
        out = {}
        for name in names:
            spec = self.topics.get(name)
            if not isinstance(spec, TopicLocation):
                raise StreamsError(f"topic {name!r} is written by {self.application_id!r} but "
                                   f"its location {spec!r} is not a kspark.io sink")
            out[name] = spec
        return out

    def _run_id(self, timeout: float = 60.0) -> str:
        """The id of the app's query: it persists in the checkpoint, so a restarted query
        continues the same run (the first batch may come before ``start()`` has returned)."""
        deadline = time.monotonic() + timeout
        while self._query is None:
            if time.monotonic() > deadline:
                raise StreamsError(f"StreamsApp {self.application_id!r}: the query did not start")
            time.sleep(0.01)
        return str(self._query.id)

    def process_all_available(self, timeout: float = 600.0) -> None:
        """Block until every source's input available now has been processed.

        With a tick source (wall-clock punctuation or idle closing) there is always new input,
        so this waits for a micro-batch planned after the call that left no data source behind.
        """
        query = self._require_query()
        from kspark.spark.internals.progress import wait_caught_up

        with kspark_errors(self.application_id, self.checkpoint_dir):
            if self._ticks:
                wait_caught_up(query, timeout)
            else:
                query.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool | None:
        """Block until the query stops (or ``timeout`` seconds pass: then ``False``); a failed
        query raises kspark's error for it."""
        query = self._require_query()
        with kspark_errors(self.application_id, self.checkpoint_dir):
            if timeout is None:
                return query.awaitTermination()
            return query.awaitTermination(timeout)

    def stop(self) -> None:
        if self._query is not None:
            self._query.stop()
            self._query = None
        for spec in self.topics.values():
            if isinstance(spec, TopicLocation):  # e.g. a Kafka sink's producer
                spec.close()

    def _require_query(self) -> Any:
        if self._query is None:
            raise StreamsError(f"StreamsApp {self.application_id!r} is not started")
        return self._query

    @property
    def query(self) -> Any:
        return self._query

    def store(self, name: str) -> Any:
        """A read-only view of store ``name`` (docs/api.md's read methods) over every task, reading
        the latest committed state of this app's query, running or stopped; it follows new
        commits. Unknown names raise ``InvalidStateStoreError`` listing the stores."""
        from kspark.spark.internals.query import app_info, store_view
        from kspark.spark.internals.results import with_frames

        view = store_view(self.spark, self.checkpoint_dir, name, app_info(self))
        return with_frames(self.spark, view)  # and .to_frame(): its contents as a DataFrame

    def output(self, topic: str) -> Any:
        """The typed records written so far to sink topic ``topic`` as a Spark DataFrame (file,
        memory, table and Kafka sinks; docs/api.md "Results in Spark")."""
        from kspark.spark.internals.results import output_frame

        return output_frame(self, topic)

    def required_acls(self) -> dict[str, list[AclNeed]]:
        """The ACLs this application needs on each Kafka cluster it uses (bootstrap servers to
        a list; docs/api.md: ACLs an application needs)."""
        return required_acls(self.application_id, self.topology, self.topics,
                             self.config.dead_letter_topic)

    def metrics(self) -> dict[str, int]:
        """Counters since this app object started (dropped records, processed records, ...)."""
        return self.metrics_report().counters

    def metrics_report(self) -> MetricsReport:
        """Figures per task and for the app, Kafka Streams' names (docs/api.md "Metrics")."""
        self._refresh_figures()
        with self._lock:
            return self._live.report(self.application_id)

    def serve_metrics(self, port: int = 0, host: str = "0.0.0.0") -> MetricsEndpoint:
        """Serve :meth:`metrics_report` in Prometheus' text format on ``host:port`` (0: a free
        port) until the endpoint is closed; needs the ``metrics`` extra."""
        from kspark.spark.prometheus import serve_metrics

        return serve_metrics(self, port, host)

    def wait_until_idle_ticks(self, count: int, timeout: float = 60.0) -> None:
        """Wait until ``count`` more micro-batches ran (ticks included)."""
        self._refresh_figures()
        target = self._live.batches + count
        deadline = time.time() + timeout
        while self._live.batches < target:
            self._refresh_figures()
            if time.time() > deadline:
                raise TimeoutError(f"fewer than {count} batches in {timeout} s")
            exc = self._require_query().exception()
            if exc is not None:
                raise as_kspark_error(exc, self.application_id, self.checkpoint_dir) from exc
            time.sleep(0.1)

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["PunctuationType", "StreamsApp"]
