"""A task's durable state with a local spill area, for stores whose memory is limited
(``state.buckets.in.memory``, docs/semantics.md §6).

A store that lets go of a changed bucket during a batch puts it here; the bucket waits in a file
of the task's own temporary directory (on an executor's local disk), and the store's next use
of it loads it from there. When the batch is written, every spilled bucket that was not written
since goes to the durable state from its file. The durable state itself is not touched before
the batch ends, so a batch that is run again (the vectorised path giving up) starts from it
after :meth:`SpillingState.discard`.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from kspark.runtime.durable_state import TaskStateBackend


def local_dir() -> str | None:
    """Where spill files go: the first of the local directories Spark gives its Python workers
    (``SPARK_LOCAL_DIRS``, an executor's scratch disks), else the system's temporary one."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d]
    return dirs[0] if dirs else None


class SpillingState:
    """``inner`` (a :class:`~kspark.runtime.durable_state.TaskStateBackend`) with spilled buckets
    kept in local files until :meth:`write_spilled`."""

    def __init__(self, inner: TaskStateBackend, directory: str | None = None) -> None:
        self.inner = inner
        self._parent = directory
        self._dir: str | None = None
        #: (store, bucket) -> its file, or ``None`` for a bucket spilled empty
        self._spilled: dict[tuple[str, int], str | None] = {}
        #: buckets written to a file since this object was made
        self.spills = 0
        #: each store's count of a bucket's entries (``StoreBase.bucket_entries``)
        self.entry_counts: dict[str, Callable[[Any], int]] = {}
        #: (store, bucket) -> entries and bytes of what is spilled, ``None`` when empty
        self._sizes: dict[tuple[str, int], tuple[int, int] | None] = {}

    # -- TaskStateBackend --------------------------------------------------------------------
    def get_meta(self) -> bytes | None:
        return self.inner.get_meta()

    def set_meta(self, blob: bytes) -> None:
        self.inner.set_meta(blob)

    def load(self, store: str, bucket: int) -> Any | None:
        key = (store, bucket)
        if key not in self._spilled:
            return self.inner.load(store, bucket)
        path = self._spilled[key]
        if path is None:
            return None
        with open(path, "rb") as f:
            return pickle.load(f)

    def save_bucket(self, store: str, bucket: int, blob: bytes | None) -> None:
        self._forget((store, bucket))
        self.inner.save_bucket(store, bucket, blob)

    def prefetch(self) -> None:
        """Nothing: reading every bucket at once is what a limited memory must not do."""

    # -- BucketSpill -------------------------------------------------------------------------
    def spill(self, store: str, bucket: int, data: Any | None) -> None:
        """Keep ``data`` (``None``: empty) as the latest version of ``store``'s ``bucket``."""
        key = (store, bucket)
        if data is None:
            self._forget(key)
            self._spilled[key] = None
            self._sizes[key] = None
            return
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="kspark-spill-", dir=self._parent or local_dir())
        path = self._spilled.get(key) or os.path.join(self._dir, f"{self.spills}.bin")
        with open(path, "wb") as f:
            pickle.dump(data, f, protocol=5)
            size = f.tell()
        self._spilled[key] = path
        count = self.entry_counts.get(store)
        self._sizes[key] = (0 if count is None else count(data), size)
        self.spills += 1

    # -- end of a batch ----------------------------------------------------------------------
    def write_spilled(self) -> dict[tuple[str, int], tuple[int, int] | None]:
        """Write every spilled bucket to the durable state, then remove the files; returns
        each written bucket's entries and bytes (``None``: empty)."""
        sizes = dict(self._sizes)
        for (store, bucket), path in list(self._spilled.items()):
            if path is None:
                self.inner.save_bucket(store, bucket, None)
            else:
                with open(path, "rb") as f:
                    self.inner.save_bucket(store, bucket, f.read())
        self.discard()
        return sizes

    def discard(self) -> None:
        """Forget every spilled bucket (the durable state is as before the batch)."""
        self._spilled.clear()
        self._sizes.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _forget(self, key: tuple[str, int]) -> None:
        self._sizes.pop(key, None)
        path = self._spilled.pop(key, None)
        if path is not None:
            os.unlink(path)
