"""A task's commit: every store's cache flushed (its changes forwarded downstream) until all are
clean. A failure downstream of a flush is reported with the record the commit follows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kspark.errors import StreamsError
from kspark.runtime.context import RecordContext
from kspark.state.internals.base import StoreBase


def flush_caches(task_id: str, caching: Sequence[StoreBase], current: RecordContext,
                 wrap: Callable[[Exception, str], StreamsError]) -> None:
    """Flush the caches of ``caching`` until none has cached changes; a failure is raised as
    ``wrap(exc, where)``, ``where`` naming the store, the last record's topic, partition and
    offset, and the key of the flushed record that failed."""
    for store in caching:
        if store.has_cached_changes():
            break
    else:
        return
    meta = current.record_metadata()
    after = ("" if meta is None else
             f" after the record at topic {meta.topic!r} partition {meta.partition} offset "
             f"{meta.offset}")
    for _ in range(len(caching) + 1):
        dirty = [s for s in caching if s.has_cached_changes()]
        if not dirty:
            return
        for store in dirty:
            try:
                current.run_in(current.node or "", current.timestamp, None, store.flush)
            except Exception as exc:
                key = current.failed_key
                raise wrap(exc, f"flushing the cache of store {store.name!r} at the commit"
                                f"{after}, record key {key!r:.100}") from exc
    if any(s.has_cached_changes() for s in caching):
        raise StreamsError(f"task {task_id}: store caches did not settle at commit")
