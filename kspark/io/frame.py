"""Any streaming DataFrame as a source topic: ``io.frame(df, key=..., value=..., timestamp=...)``.

The frame's columns are named: ``key`` (its text as UTF-8 bytes; ``None``: no key), ``value``
(a column, or ``None`` for the whole row; a struct or a row becomes a JSON object, handed to
the topology as a dict by the ``Json`` serde), ``timestamp`` (a timestamp column, or whole epoch
milliseconds). Records go to ``partitions`` tasks by their key as Kafka's default partitioner
puts them. Within a micro-batch each task gets its records in the order of ``order_by`` (a
column), else in the order they arrive.

A row whose key or timestamp cannot make a record (a null or unreadable timestamp, a key of a
type without text) is handled as the deserialization handler says: the app stops with an error
naming the column and the row's batch and position, or with ``log_and_continue`` skips it,
counted (see :mod:`kspark.spark.internals.frame_source`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kspark.io.location import TopicLocation


@dataclass(eq=False)
class FrameTopic(TopicLocation):
    """A streaming DataFrame read as a source topic (see the module's documentation)."""

    frame: Any
    key: str | None
    value: str | None
    timestamp: str
    partitions: int = 1
    order_by: str | None = None

    def __post_init__(self) -> None:
        columns = set(self.frame.columns)
        for role, name in (("key", self.key), ("value", self.value),
                           ("timestamp", self.timestamp), ("order_by", self.order_by)):
            if name is not None and name not in columns:
                raise ValueError(f"io.frame: {role} column {name!r} is not a column of the frame "
                                 f"(columns: {', '.join(sorted(columns))})")
        if self.partitions < 1:
            raise ValueError(f"io.frame: partitions must be >= 1, got {self.partitions}")

    @property
    def num_partitions(self) -> int:
        return self.partitions

    def write_table(self, batch_id: int, table: Any) -> None:
        raise TypeError("an io.frame topic is a source; it cannot be written")
