"""What a topic location is to a :class:`~kspark.spark.StreamsApp`: the declared interface of
``kspark.io.files``, ``kspark.io.memory`` and ``kspark.io.kafka``, and what a location may know
of the application that uses it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kspark.config import StreamsConfig
from kspark.topology.internals.plan import ExecutionPlan
from kspark.topology.topology import Topology


class AppView(Protocol):
    """The application as its topic locations see it at ``start()``."""

    application_id: str
    topology: Topology
    config: StreamsConfig

    @property
    def plan(self) -> ExecutionPlan:
        """Stages, tasks and every topic's partition count."""

    @property
    def spark_partitions(self) -> int:
        """Spark partitions of each stage: the query's last stage writes that many partitions
        of each batch."""

    @property
    def query(self) -> Any:
        """The running Spark query (``None`` before ``start()`` has made it)."""


class PartitionWriter(ABC):
    """Writes a micro-batch's records of some topics from the Spark tasks that computed them,
    each task its own partition of the batch, once (it is pickled to the executors). Topics
    that share a writer object are written together: one Kafka transaction per task."""

    #: whether :meth:`write`'s tables have the records' headers too (column
    #: :data:`~kspark.io.schema.HEADERS_COLUMN`)
    takes_headers: bool = False

    @abstractmethod
    def write(self, batch_id: int, run: str, partition: int, tables: Mapping[str, Any]
              ) -> dict[str, int]:
        """In an executor: write Spark partition ``partition``'s records of batch ``batch_id``
        of query run ``run`` (``tables``: topic -> non-empty Arrow table of key, value,
        timestamp and partition, and headers with :attr:`takes_headers`). A replayed partition
        must not be written twice. Returns counters for the application's metrics."""

    def begin(self, batch_id: int, run: str, partition: int) -> None:  # noqa: B027 (optional hook)
        """In an executor, when the task of ``partition`` starts and before its records are
        known: start what writing them needs (a Kafka producer), so that it overlaps the
        stage computing them. :meth:`end` follows, whether :meth:`write` was called or not."""

    def end(self) -> None:  # noqa: B027 (optional hook)
        """In an executor, after the task's writes (or none): release what :meth:`begin` made."""

    def publish(self, batch_id: int, run: str) -> None:  # noqa: B027 (optional hook)
        """On the driver, once every partition of batch ``batch_id`` is written."""


class TaskWriter(ABC):
    """Writes a kspark task's records of a micro-batch from its stage, right after the task
    (not at the end of the Spark task that runs it with others), once per task and batch: the
    unit Kafka Streams' tasks commit in. Pickled to the executors with the stage."""

    @abstractmethod
    def take_over(self, tasks: Mapping[str, int]) -> None:
        """On the driver at ``app.start()``: make sure no earlier instance of the application
        still writes for ``tasks`` (task id -> the Spark partition that runs it; their writers
        fenced), and that a batch the Spark partition's :class:`PartitionWriter` wrote for them
        before is not written again."""

    @abstractmethod
    def open_task(self, batch_id: int, run: str, task: str) -> None:
        """Before task ``task`` runs its part of batch ``batch_id`` of query run ``run`` (and
        maybe before the tasks run ahead of it): start what writing its records needs,
        overlapping the tasks' work; once per task and batch. :meth:`close_task` follows,
        whether :meth:`write_task` was called or not."""

    @abstractmethod
    def write_task(self, batch_id: int, run: str, task: str,
                   rows: Mapping[str, Iterable[list[tuple[Any, Any, int, int, Any]]]],
                   final: bool = True) -> dict[str, int]:
        """Write the task's records (topic -> lists of ``(key, value, timestamp, partition,
        headers)``, each list taken once, one at a time, as it is written), unless the task
        wrote this batch before (a retried or replayed one). A task may write its batch in
        several calls: the records of every call become visible together, with the last
        (``final``). Returns counters for the application's metrics."""

    @abstractmethod
    def abort_task(self, task: str) -> None:
        """Forget what task ``task`` wrote of its batch so far (not ``final``): it runs the
        batch again from the start."""

    @abstractmethod
    def close_task(self, task: str) -> None:
        """Release what :meth:`open_task` made for ``task``."""

    @abstractmethod
    def close_tasks(self) -> None:
        """When the Spark task that ran the tasks ends: release what :meth:`open_task` made
        for tasks that did not run."""


class TopicLocation(ABC):
    """Where one topic of a topology lives: a source, a sink, or both."""

    #: why it cannot be a sink of an app run over Spark Connect, whose server writes the
    #: micro-batches in a process of its own (``None``: it can)
    not_over_connect: str | None = None

    @property
    @abstractmethod
    def num_partitions(self) -> int | None:
        """The topic's partition count (``None`` while not known, e.g. a topic to create)."""

    def prepare(self, app: AppView, topic: str) -> None:  # noqa: B027 (optional hook)
        """At ``app.start()``, before the query: check or create what the topic needs."""

    def partition_writer(self) -> PartitionWriter | None:
        """Where the executors write this sink topic's records (``None``: the driver writes them
        with :meth:`write_table`). Topics written together return the same object."""
        return None

    def write_table(self, batch_id: int, table: Any) -> None:
        """On the driver, for a sink without a :meth:`partition_writer`: write micro-batch
        ``batch_id``'s records, an Arrow table with the columns key, value, timestamp and
        partition (every batch; maybe empty). A replayed batch must not be written twice."""
        raise NotImplementedError(f"{type(self).__name__} is written by its partition writer")

    def commit_batch(self, batch_id: int, run: str) -> None:  # noqa: B027 (optional hook)
        """After every sink has written batch ``batch_id`` of query run ``run``."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """At ``app.stop()``: release clients and files."""
