"""Where a topology's topics live: ``StreamsApp(topics={"name": kspark.io.files(...), ...})``."""

from __future__ import annotations

from typing import Any

from kspark.io.files import FileTopic
from kspark.io.frame import FrameTopic
from kspark.io.kafka import KafkaTopic
from kspark.io.memory import MemoryTopic


def files(path: str, format: str = "jsonl", **options: Any) -> FileTopic:
    """A directory of JSON-lines or Parquet files (source or sink); see :class:`FileTopic`."""
    return FileTopic(path, format=format, **options)


def frame(df: Any, *, key: str | None, timestamp: str, value: str | None = None,
          partitions: int = 1, order_by: str | None = None) -> FrameTopic:
    """A streaming DataFrame as a source topic, its columns named; see :class:`FrameTopic`."""
    return FrameTopic(df, key, value, timestamp, partitions, order_by)


def memory(
    key_serde: Any = None,
    value_serde: Any = None,
    partitions: int = 1,
    max_files_per_trigger: int | None = None,
) -> MemoryTopic:
    """An in-memory topic for tests and notebooks; see :class:`MemoryTopic`."""
    return MemoryTopic(key_serde, value_serde, partitions, max_files_per_trigger)


def kafka(
    bootstrap_servers: str,
    topic: str | list[str] | None = None,
    *,
    pattern: str | None = None,
    partitions: int | None = None,
    starting_offsets: str | dict[str, dict[int, int]] = "earliest",
    max_records_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    create: bool = True,
    config: dict[str, Any] | None = None,
    source: str = "auto",
) -> KafkaTopic:
    """A topic on a Kafka cluster (source or sink); see :class:`KafkaTopic`."""
    return KafkaTopic(
        bootstrap_servers,
        topic,
        pattern,
        partitions,
        starting_offsets,
        max_records_per_trigger,
        fail_on_data_loss,
        create,
        dict(config or {}),
        source=source,
    )


__all__ = ["FileTopic", "FrameTopic", "KafkaTopic", "MemoryTopic", "files", "frame", "kafka",
           "memory"]
