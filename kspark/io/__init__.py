"""Where a topology's topics live: ``StreamsApp(topics={"name": kspark.io.files(...), ...})``."""

from __future__ import annotations

from typing import Any

from kspark.io.files import FileTopic
from kspark.io.memory import MemoryTopic


def files(path: str, format: str = "jsonl", **options: Any) -> FileTopic:
    """A directory of JSON-lines or Parquet files (source or sink); see :class:`FileTopic`."""
    return FileTopic(path, format=format, **options)


def memory(
    key_serde: Any = None,
    value_serde: Any = None,
    partitions: int = 1,
    max_files_per_trigger: int | None = None,
) -> MemoryTopic:
    """An in-memory topic for tests and notebooks; see :class:`MemoryTopic`."""
    return MemoryTopic(key_serde, value_serde, partitions, max_files_per_trigger)


__all__ = ["FileTopic", "MemoryTopic", "files", "memory"]
