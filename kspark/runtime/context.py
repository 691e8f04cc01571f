"""What a task is doing now: the processor running, the record it handles, and where a failure
happened first. Forwarding, punctuation and the batch path share one :class:`RecordContext`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kspark.records import RecordMetadata

#: a record's topic, partition and offset, made a :class:`RecordMetadata` when asked for
Origin = tuple[str, int, int]


@dataclass(slots=True)
class RecordContext:
    """The processor running (``node``), the timestamp of the record it handles, that record's
    origin (``metadata``; ``None`` in punctuation), and the first processor that failed with the
    key of the record it was given."""

    node: str | None = None
    timestamp: int = -1
    metadata: RecordMetadata | Origin | None = None
    failed_node: str | None = None
    failed_key: Any = None

    def record_metadata(self) -> RecordMetadata | None:
        """The origin of the record being processed (``None`` in punctuation)."""
        meta = self.metadata
        if isinstance(meta, tuple):
            meta = RecordMetadata(*meta)
            self.metadata = meta
        return meta

    def run_in(
        self, node: str, timestamp: int, metadata: RecordMetadata | Origin | None,
        fn: Callable[[], Any],
    ) -> Any:
        """``fn()`` with the context set to ``node``, ``timestamp`` and ``metadata``."""
        previous = self.node, self.timestamp, self.metadata
        self.node, self.timestamp, self.metadata = node, timestamp, metadata
        try:
            return fn()
        finally:
            self.node, self.timestamp, self.metadata = previous

    def in_node(self, name: str, fn: Callable[[Any], Any], arg: Any) -> Any:
        """``fn(arg)``; a failure is reported as processor ``name``'s."""
        try:
            return fn(arg)
        except Exception:
            self.failed(name)
            raise

    def failed(self, node: str, key: Any = None) -> None:
        """Note that ``node`` failed (on a record with ``key``), unless a processor below it
        failed first."""
        if self.failed_node is None:
            self.failed_node, self.failed_key = node, key

    def take_failed_node(self) -> str:
        """The processor to name in an error (the first that failed, else the running one)."""
        node = self.failed_node or self.node or "?"
        self.failed_node = self.failed_key = None
        return node
