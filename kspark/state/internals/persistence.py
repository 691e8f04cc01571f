"""An in-memory :class:`~kspark.state.internals.base.BucketLoader` and writer.

It keeps every bucket pickled, as the Spark runtime keeps them in Spark state, so what a store
reads back is a copy, never the object it wrote. Tests use it; it is also the reference for the
Spark runtime's loader: load a bucket on first use, write back only the dirty ones.
"""

from __future__ import annotations

import pickle
from typing import Any

from kspark.state.internals.base import StoreBase


class DictBucketLoader:
    """Buckets by ``(store name, bucket)`` and store metadata by store name, kept pickled."""

    def __init__(self) -> None:
        self.buckets: dict[tuple[str, int], bytes] = {}
        self.metas: dict[str, bytes] = {}

    def load(self, store: str, bucket: int) -> Any | None:
        """A fresh copy of the bucket's data, or ``None`` if it has none."""
        data = self.buckets.get((store, bucket))
        return None if data is None else pickle.loads(data)

    def save(self, store: StoreBase) -> None:
        """Write ``store``'s dirty buckets (deleting emptied ones) and its metadata, then mark
        the store clean."""
        for bucket, data in store.dirty_buckets().items():
            if data is None:
                self.buckets.pop((store.name, bucket), None)
            else:
                self.buckets[(store.name, bucket)] = pickle.dumps(data, pickle.HIGHEST_PROTOCOL)
        self.metas[store.name] = pickle.dumps(store.meta(), pickle.HIGHEST_PROTOCOL)
        store.clear_dirty()

    def load_meta(self, store_name: str) -> dict[str, Any]:
        """The metadata last saved for ``store_name`` (``{}`` if none)."""
        data = self.metas.get(store_name)
        return {} if data is None else pickle.loads(data)

    def bucket_ids(self, store_name: str) -> list[int]:
        """The buckets holding data of ``store_name``, ascending."""
        return sorted(b for s, b in self.buckets if s == store_name)
