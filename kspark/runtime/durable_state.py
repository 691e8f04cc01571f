"""A task's durable state between batches: the interface the runtime writes it through
(:class:`TaskStateBackend`; Spark's state on Spark) and an in-memory one (:class:`DictTaskState`)
for tests and as a reference."""

from __future__ import annotations

import pickle
from typing import Any, Protocol


class TaskStateBackend(Protocol):
    """Durable state of one task: a metadata blob and store buckets."""

    def get_meta(self) -> bytes | None: ...

    def set_meta(self, blob: bytes) -> None: ...

    def load(self, store: str, bucket: int) -> Any | None: ...

    def save_bucket(self, store: str, bucket: int, blob: bytes | None) -> None: ...

    def prefetch(self) -> None:
        """Read every bucket of the task at once (when the batch will touch most of them):
        later loads take them from what was read."""


class DictTaskState:
    """A task's durable state in a dict (tests, and a reference for other backends)."""

    def __init__(self) -> None:
        self.meta: bytes | None = None
        self.buckets: dict[tuple[str, int], bytes] = {}

    def get_meta(self) -> bytes | None:
        return self.meta

    def set_meta(self, blob: bytes) -> None:
        self.meta = blob

    def load(self, store: str, bucket: int) -> Any | None:
        blob = self.buckets.get((store, bucket))
        return None if blob is None else pickle.loads(blob)

    def save_bucket(self, store: str, bucket: int, blob: bytes | None) -> None:
        if blob is None:
            self.buckets.pop((store, bucket), None)
        else:
            self.buckets[(store, bucket)] = blob

    def prefetch(self) -> None:
        """Nothing to do: the buckets are in memory."""
