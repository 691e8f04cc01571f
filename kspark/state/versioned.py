"""The in-memory versioned key-value store (Kafka Streams' KIP-889): each key's values with the
time each was valid from, kept for ``history_retention_ms`` (docs/semantics.md §6).

A put at ``ts`` is a new version of its key, valid from ``ts`` until the next version's
timestamp; a put of ``None`` is a tombstone version (the key has no value from then). A put at a
timestamp that already has a version replaces it. The store observes the largest timestamp put
so far; a put older than ``observed - history_retention`` is not stored (counted as
``expired-segment``) and its put returns :data:`PUT_RETURN_CODE_NOT_PUT`, otherwise the put
returns the new version's end of validity: the next version's timestamp, or
:data:`PUT_RETURN_CODE_VALID_TO_UNDEFINED` for the latest version. ``get(key)`` is the latest
value; ``get(key, as_of)`` the version valid at ``as_of``, while ``as_of`` is within the history
retention (older: only the latest version, if it is valid then). Every put is logged as ``(key,
value, timestamp)``, as Kafka Streams' versioned changelog (the value's own bytes, the version's
timestamp as the record's).

Bucket data: ``{key: [(timestamp, value or None), ...]}``, each key's versions in timestamp
order; versions no query can reach any more are let go as the store observes later times.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state.internals.base import DEFAULT_BUCKETS, StoreBase
from kspark.state.internals.common import check_name, order_error

#: a put that was not stored (older than the history retention)
PUT_RETURN_CODE_NOT_PUT: Final = -(1 << 63)
#: a put that made the latest version (no later version ends its validity)
PUT_RETURN_CODE_VALID_TO_UNDEFINED: Final = -1


class VersionedRecord(NamedTuple):
    """A value of a versioned store with the time it became valid and the time it stopped
    being valid (``None``: it is the latest)."""

    value: Any
    timestamp: int
    valid_to: int | None = None


class InMemoryVersionedKeyValueStore(StoreBase):
    """A versioned key-value store (see the module)."""

    kind = "versioned"

    def __init__(self, name: str, history_retention_ms: int, *, caching: bool = False,
                 logging: bool = True, num_buckets: int = DEFAULT_BUCKETS) -> None:
        check_name(name)
        if history_retention_ms < 0:
            raise ValueError(f"store {name!r}: history retention must be >= 0 ms, got "
                             f"{history_retention_ms}")
        if caching:
            raise ValueError(f"store {name!r}: a versioned store has no cache")
        super().__init__(name, caching=False, logging=logging, num_buckets=num_buckets)
        self.history_retention_ms = history_retention_ms
        self.observed_stream_time = -(1 << 63)

    def _new_bucket(self) -> dict[Any, list[tuple[int, Any]]]:
        return {}

    def meta(self) -> dict[str, Any]:
        return {"observed": self.observed_stream_time}

    def restore_meta(self, meta: dict[str, Any]) -> None:
        self.observed_stream_time = max(self.observed_stream_time,
                                        int(meta.get("observed", self.observed_stream_time)))

    @property
    def history_bound(self) -> int:
        """The oldest time the store still answers about: ``observed - history retention``."""
        return self.observed_stream_time - self.history_retention_ms

    # -- reads -------------------------------------------------------------------------------
    def _versions(self, key: Any) -> list[tuple[int, Any]] | None:
        if key is None:
            raise ValueError(f"store {self.name!r}: key must not be None")
        data = self._bucket_for(key, create=False)
        return None if data is None else data.get(key)

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest value of ``key``, or (with ``as_of_timestamp``) the one valid then;
        ``None`` if it had none (or a tombstone) then, or the time is past the history
        retention and the latest version is not valid then."""
        versions = self._versions(key)
        if not versions:
            return None
        if as_of_timestamp is None:
            ts, value = versions[-1]
            return None if value is None else VersionedRecord(value, ts)
        if as_of_timestamp < self.history_bound:
            ts, value = versions[-1]
            if ts <= as_of_timestamp and value is not None:
                return VersionedRecord(value, ts)
            return None
        i = bisect_right(versions, as_of_timestamp, key=_stamp) - 1
        if i < 0:
            return None
        ts, value = versions[i]
        if value is None:
            return None
        valid_to = versions[i + 1][0] if i + 1 < len(versions) else None
        return VersionedRecord(value, ts, valid_to)

    def get_with_timestamp(self, key: Any) -> Any:
        """The latest value as ``ValueAndTimestamp`` (what a table's lookup reads)."""
        found = self.get(key)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)

    def all(self) -> list[KeyValue]:
        """``KeyValue(key, latest value)`` of every key that has one, in key order."""
        rows = [KeyValue(key, versions[-1][1])
                for _, data in self._all_buckets() if data
                for key, versions in data.items() if versions[-1][1] is not None]
        try:
            rows.sort(key=_key)
        except TypeError as exc:
            raise order_error(self.name, exc) from exc
        return rows

    def _current(self, store_key: Any) -> Any:
        found = self.get(store_key)
        return None if found is None else found.value

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: Any, value: Any, timestamp: int | None = None) -> int:
        """Add a version of ``key`` valid from ``timestamp`` (default: the record's); return
        its end of validity, :data:`PUT_RETURN_CODE_VALID_TO_UNDEFINED` for the latest version
        or :data:`PUT_RETURN_CODE_NOT_PUT` if it is past the history retention."""
        self._check_writable(key)
        ts = self._timestamp(timestamp)
        code = self._apply(key, value, ts)
        if code == PUT_RETURN_CODE_NOT_PUT:
            self.context.record_dropped(
                "expired-segment",
                f"store {self.name!r}: a put of key {key!r:.80} at {ts} is older than the "
                f"history retention (observed {self.observed_stream_time}, retention "
                f"{self.history_retention_ms} ms)")
        if self.logging:
            self.context.log_change(self.name, key, value, ts)
        return code

    def delete(self, key: Any, timestamp: int | None = None) -> VersionedRecord | None:
        """A tombstone version at ``timestamp``; return the version it replaces as valid."""
        ts = self._timestamp(timestamp)
        if ts < self.history_bound:
            return None
        existing = self.get(key, ts)
        self.put(key, None, ts)
        return existing

    def _apply(self, key: Any, value: Any, ts: int) -> int:
        """Store the version (no checks, no logging); shared by puts and restoration."""
        if ts < self.history_bound:
            return PUT_RETURN_CODE_NOT_PUT
        self.observed_stream_time = max(self.observed_stream_time, ts)
        bucket = self.bucket_of(key)
        data = self._bucket(bucket, create=True)
        versions = data.get(key)
        if versions is None:
            versions = data[key] = []
        i = bisect_right(versions, ts, key=_stamp)
        if (value is None and versions and i == len(versions) and versions[-1][0] == ts
                and versions[-1][1] is not None
                and (len(versions) == 1 or versions[-2][1] is None)):
            # a tombstone at the latest value's own timestamp deletes it without a trace when
            # no earlier value ends there (Kafka Streams drops the latest value, and no segment
            # keeps the time): an older value put later becomes the latest
            del versions[-1]
            i -= 1
        elif i > 0 and versions[i - 1][0] == ts:
            versions[i - 1] = (ts, value)  # the same timestamp: replaced
        else:
            versions.insert(i, (ts, value))
            i += 1
        valid_to = versions[i][0] if i < len(versions) else PUT_RETURN_CODE_VALID_TO_UNDEFINED
        self._prune(versions)
        if not versions or (len(versions) == 1 and versions[0][1] is None
                            and versions[0][0] < self.history_bound):
            del data[key]
        self._touch(bucket)
        return valid_to

    def _prune(self, versions: list[tuple[int, Any]]) -> None:
        """Let go of versions that ended before the history retention (the latest stays)."""
        bound = self.history_bound
        drop = 0
        while drop + 1 < len(versions) and versions[drop + 1][0] <= bound:
            drop += 1
        if drop:
            del versions[:drop]

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        for key, value, timestamp in changelog:
            self._apply(key, value, timestamp)


def _stamp(version: tuple[int, Any]) -> int:
    return version[0]


def _key(row: KeyValue) -> Any:
    return row.key
