"""The in-memory key-value store (docs/semantics.md §6)."""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from sortedcontainers import SortedDict

from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state.internals.base import DEFAULT_BUCKETS, StoreBase
from kspark.state.internals.common import check_name, merge_sorted, order_error

_by_key = itemgetter(0)
#: ``KeyValue(key, value)`` without the named tuple's Python ``__new__``
_new_tuple = tuple.__new__


def _to_kv(item: tuple[Any, Any]) -> KeyValue:
    return _new_tuple(KeyValue, (item[0], item[1][0]))


class InMemoryKeyValueStore(StoreBase):
    """Values (with the timestamp that wrote them) by key; keys are kept sorted.

    Bucket data: ``SortedDict(key -> (value, timestamp))``. The store key is the key.
    """

    kind = "key_value"

    def __init__(
        self,
        name: str,
        *,
        caching: bool = False,
        logging: bool = True,
        num_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        check_name(name)
        super().__init__(name, caching=caching, logging=logging, num_buckets=num_buckets)

    def _new_bucket(self) -> SortedDict:
        return SortedDict()

    # -- reads -------------------------------------------------------------------------------
    def _check_key(self, key: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: key must not be None")

    def _entry(self, key: Any) -> tuple[Any, int] | None:
        data = self._bucket_for(key, create=False)
        return None if data is None else data.get(key)

    def _lookup(self, key: Any) -> tuple[Any, int] | None:
        """``key``'s ``(value, timestamp)`` (the reads' fast path: a str key's bucket from the
        memo, the bucket from memory)."""
        bucket = self._bucket_memo.get(key) if type(key) is str else None
        if bucket is None:
            if key is None:
                self._check_key(key)
            bucket = self.bucket_of(key)
        data = self._buckets.get(bucket)
        if data is None:
            data = self._bucket(bucket, create=False)
            if data is None:
                return None
        entry: tuple[Any, int] | None = data.get(key)
        return entry

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        entry = self._lookup(key)
        return None if entry is None else entry[0]

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The value of ``key`` with the timestamp of the write that stored it, or ``None``."""
        entry = self._lookup(key)
        return None if entry is None else ValueAndTimestamp(entry[0], entry[1])

    def _current(self, store_key: Any) -> Any:
        entry = self._entry(store_key)
        return None if entry is None else entry[0]

    def _runs(self, lo: Any, hi: Any, reverse: bool) -> list[list[tuple[Any, Any]]]:
        runs = []
        try:
            for _, data in self._all_buckets():
                if data:
                    if lo is None and hi is None:
                        keys = reversed(data) if reverse else data
                    else:
                        keys = data.irange(lo, hi, reverse=reverse)
                    runs.append([(k, data[k]) for k in keys])
        except TypeError as e:
            raise order_error(self.name, e) from e
        return runs

    def range(self, lo: Any, hi: Any) -> list[KeyValue]:
        """Entries with ``lo <= key <= hi`` (``None``: unbounded), ascending by key."""
        return merge_sorted(self.name, self._runs(lo, hi, False), _by_key, _to_kv, presorted=True)

    def reverse_range(self, lo: Any, hi: Any) -> list[KeyValue]:
        """Entries with ``lo <= key <= hi`` (``None``: unbounded), descending by key."""
        runs = self._runs(lo, hi, True)
        return merge_sorted(self.name, runs, _by_key, _to_kv, reverse=True, presorted=True)

    def all(self) -> list[KeyValue]:
        """Every entry, ascending by key."""
        return self._everything(False)

    def reverse_all(self) -> list[KeyValue]:
        """Every entry, descending by key."""
        return self._everything(True)

    def _everything(self, reverse: bool) -> list[KeyValue]:
        """``range(None, None)`` (or ``reverse_range``): the buckets' entries sorted at once
        (a stable sort, so equal keys of two buckets stay in bucket order, as merged)."""
        items: list[tuple[Any, Any]] = []
        for _, data in self._all_buckets():
            items.extend(dict.items(data))
        try:
            items.sort(key=_by_key, reverse=reverse)
        except TypeError:  # the merge's own error
            return self.reverse_range(None, None) if reverse else self.range(None, None)
        return [_new_tuple(KeyValue, (key, entry[0])) for key, entry in items]

    def prefix_scan(self, prefix: str | bytes) -> list[KeyValue]:
        """Entries whose (str or bytes) key starts with ``prefix``, ascending by key."""
        if not isinstance(prefix, str | bytes):
            raise TypeError(f"store {self.name!r}: prefix must be str or bytes, got {prefix!r}")
        runs = []
        try:
            for _, data in self._all_buckets():
                run = []
                for k in data.irange(minimum=prefix) if data else ():
                    if not k.startswith(prefix):
                        break
                    run.append((k, data[k]))
                runs.append(run)
        except TypeError as e:
            raise order_error(self.name, e) from e
        return merge_sorted(self.name, runs, _by_key, _to_kv, presorted=True)

    def approximate_num_entries(self) -> int:
        """The number of entries (exact for this store)."""
        return sum(len(data) for _, data in self._all_buckets())

    # -- writes ------------------------------------------------------------------------------
    def _apply(self, key: Any, value: Any, timestamp: int) -> tuple[Any, int] | None:
        """Store ``(value, timestamp)`` under ``key`` (delete it if ``value is None``); return
        the previous entry. No checks, logging or caching: shared by writes and restoration."""
        bucket = self.bucket_of(key)
        if value is None:
            data = self._bucket(bucket, create=False)
            old = data.pop(key, None) if data else None
            if old is not None:
                self._touch(bucket)
            return old
        data = self._bucket(bucket, create=True)
        old = data.get(key)
        try:
            data[key] = (value, timestamp)
        except TypeError as e:
            raise order_error(self.name, e) from e
        self._touch(bucket)
        return old

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Store ``value`` under ``key`` (``None`` deletes). ``timestamp`` defaults to the
        timestamp of the record being processed; a delete always has that one (Kafka Streams
        stores no timestamp with a null value and logs, caches and so forwards the delete at the
        record's: ``ChangeLoggingTimestampedKeyValueBytesStore#put``). A delete is logged even
        when nothing was stored, as Kafka Streams logs it (the cache drops it when both sides
        are ``None``)."""
        if key is None or self.read_only:
            self._check_writable(key)
        ts = (self.context.record_timestamp() if timestamp is None or value is None
              else timestamp)
        if value is None:
            old = self._apply(key, value, ts)
        else:  # _apply's write, inline
            bucket = self._bucket_memo.get(key) if type(key) is str else None
            if bucket is None:
                bucket = self.bucket_of(key)
            data = self._buckets.get(bucket)
            if data is None:
                data = self._bucket(bucket, create=True)
            old = data.get(key)
            try:
                if old is None:
                    data[key] = (value, ts)
                else:  # a key already there: the sorted keys stay as they are
                    dict.__setitem__(data, key, (value, ts))
            except TypeError as e:
                raise order_error(self.name, e) from e
            self._dirty_buckets.add(bucket)
        old_value = None if old is None else old[0]
        if self.caching:
            self._changed(key, old_value, value, ts)
        elif self.logging:
            self.context.log_change(self.name, key, value, ts)

    def put_if_absent(self, key: Any, value: Any, timestamp: int | None = None) -> Any:
        """Store ``value`` unless ``key`` has a value; return that existing value or ``None``."""
        self._check_writable(key)
        existing = self._entry(key)
        if existing is not None:
            return existing[0]
        self.put(key, value, timestamp)
        return None

    def delete(self, key: Any) -> Any:
        """Delete ``key``; return its previous value or ``None``."""
        self._check_writable(key)
        ts = self._timestamp(None)
        old = self._apply(key, None, ts)
        self._changed(key, None if old is None else old[0], None, ts)
        return None if old is None else old[0]

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        """``put`` each ``(key, value)`` pair in order."""
        for key, value in entries:
            self.put(key, value)

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        for key, value, timestamp in changelog:
            self._apply(key, value, timestamp)
