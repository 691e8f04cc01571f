"""What a topic location is to a :class:`~kspark.spark.StreamsApp`: the declared interface of
``kspark.io.files``, ``kspark.io.memory`` and ``kspark.io.kafka``, and what a location may know
of the application that uses it."""

from __future__ import annotations

from abc import ABC, abstractmethod
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
    def query(self) -> Any:
        """The running Spark query (``None`` before ``start()`` has made it)."""


class TopicLocation(ABC):
    """Where one topic of a topology lives: a source, a sink, or both."""

    @property
    @abstractmethod
    def num_partitions(self) -> int | None:
        """The topic's partition count (``None`` while not known, e.g. a topic to create)."""

    def prepare(self, app: AppView, topic: str) -> None:  # noqa: B027 (optional hook)
        """At ``app.start()``, before the query: check or create what the topic needs."""

    @abstractmethod
    def write_table(self, batch_id: int, table: Any) -> None:
        """Write micro-batch ``batch_id``'s records: an Arrow table with the columns key,
        value, timestamp and partition (every sink of the app, every batch; maybe empty). A
        replayed batch must not be written twice."""

    def commit_batch(self, batch_id: int, run: str) -> None:  # noqa: B027 (optional hook)
        """After every sink has written batch ``batch_id`` of query run ``run``."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """At ``app.stop()``: release clients and files."""
