"""The base every state store is built on.

A store keeps its data in *buckets* (``stable_hash(key) % num_buckets``). In the test driver all
buckets live in memory. On Spark a :class:`BucketLoader` fetches a bucket from Spark state the
first time a batch touches it, and the runtime writes back only the buckets marked dirty. Store
code reaches its data only through :meth:`StoreBase._bucket_for` and
:meth:`StoreBase._all_buckets`, so both runtimes run the same store code.

Every change goes through :meth:`StoreBase._changed` (deletes of absent keys included, as Kafka
Streams logs them). With caching off a logged store writes it to the changelog at once; with
caching on the first old value of each store key is kept until :meth:`StoreBase.flush` (the
commit), which forwards ``Change(new, old)`` to the flush listener and writes the final value to
the changelog (docs/semantics.md §6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Literal, Protocol, overload

from kspark.drop_log import DROPS
from kspark.errors import InvalidStateStoreError
from kspark.hashing import stable_hash, stable_hashes
from kspark.state.internals.packed import PackedBucket

DEFAULT_BUCKETS: Final = 16
#: most keys whose bucket a store remembers
_BUCKET_MEMO_SIZE = 1 << 16
#: the class of a bucket loaded packed, as a static of the compiled core (an imported name of a
#: module that is not compiled is looked up in the module's dictionary at every use)
_PACKED: Final = PackedBucket
#: no key yet: what a store's last looked-up key is before its first look-up
_NO_KEY: Final = object()

#: ``listener(store_key, new_value, old_value, timestamp)`` called for each dirty key at flush
#: (batched: ``listener(entries)`` once, with every such tuple in order).
FlushListener = Callable[..., None]


class StoreContext(Protocol):
    """What a store needs from the task that owns it."""

    task_id: str

    def record_timestamp(self) -> int:
        """Timestamp of the record (or punctuation) being processed; -1 if none."""

    def record_dropped(self, reason: str, detail: str) -> None:
        """Count one record in ``dropped-records`` and log ``detail``."""

    def log_change(self, store: str, key: Any, value: Any, timestamp: int) -> None:
        """Append ``(key, value or None, timestamp)`` to ``store``'s changelog."""

    def captures_changelog(self, store: str) -> bool:
        """Whether ``store``'s changelog entries are kept (else :meth:`log_change` drops them)."""


class BucketLoader(Protocol):
    """Fetches a bucket's data from durable state (Spark); ``None`` when it has none."""

    def load(self, store: str, bucket: int) -> Any | None: ...


class BucketSpill(Protocol):
    """Where a store whose memory is limited puts a changed bucket it lets go of during a
    batch (its loader gives the bucket back from there)."""

    def spill(self, store: str, bucket: int, data: Any | None) -> None: ...


class NullContext:
    """The context of a store used on its own (tests, restoration): no changelog, counts drops."""

    task_id = "standalone"

    def __init__(self) -> None:
        self.dropped = 0
        self.timestamp = -1
        self.changelog: list[tuple[Any, Any, int]] = []

    def record_timestamp(self) -> int:
        return self.timestamp

    def record_dropped(self, reason: str, detail: str) -> None:
        self.dropped += 1
        DROPS.dropped(self.task_id, reason, detail)

    def log_change(self, store: str, key: Any, value: Any, timestamp: int) -> None:
        self.changelog.append((key, value, timestamp))

    def captures_changelog(self, store: str) -> bool:
        return True



class BucketMemo:
    """The buckets of str and bytes keys for one bucket count. A key's bucket depends on the
    key and the count only, so the stores of a process with as many buckets share one: a
    record's calls into a join's or an aggregation's stores ask for the same key object in a
    row."""

    def __init__(self) -> None:
        self.buckets: dict[str | bytes, int] = {}
        #: the key last asked for and its bucket (one tuple: read and replaced at once)
        self.last: tuple[object, int] = (_NO_KEY, 0)


_MEMOS: Final[dict[int, BucketMemo]] = {}


def bucket_memo(num_buckets: int) -> BucketMemo:
    """The process's :class:`BucketMemo` for ``num_buckets``."""
    memo = _MEMOS.get(num_buckets)
    if memo is None:
        memo = _MEMOS[num_buckets] = BucketMemo()
    return memo


class StoreBase:
    """Common machinery: name, buckets, change tracking, caching, changelog, lifecycle."""

    #: "key_value", "window" or "session"; used by the runtime and by queries.
    kind = "base"

    def __init__(
        self,
        name: str,
        *,
        caching: bool = False,
        logging: bool = True,
        num_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        self.name = name
        self.caching = caching
        self.logging = logging
        self.num_buckets = num_buckets
        self.context: StoreContext = NullContext()
        #: whether a change is logged, into a changelog its task keeps (:meth:`init`): a store
        #: need not build the changelog keys of changes no one keeps
        self.logs_changes = logging
        self.read_only = False
        self._loader: BucketLoader | None = None
        self._buckets: dict[int, Any] = {}
        self._fetched: set[int] = set()  # buckets already asked of the loader this batch
        self._dirty_buckets: set[int] = set()
        #: bucket of each str / bytes key seen, shared by the process's stores with as many
        #: buckets (other key types: 1 == 1.0 == True hash apart)
        self._memo = bucket_memo(num_buckets)
        self._bucket_memo: dict[str | bytes, int] = self._memo.buckets
        # caching: store key -> (value before the first update, latest value, latest timestamp)
        self._dirty: dict[Any, tuple[Any, Any, int]] = {}
        self._flush_listener: FlushListener | None = None
        self._flush_batched = False
        self._open = False
        #: most buckets held in memory at once (``None``: no limit), see :meth:`limit_memory`
        self._memory_limit: int | None = None
        self._spill: BucketSpill | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def init(self, context: StoreContext, loader: BucketLoader | None = None) -> None:
        """Attach the store to its task. With a ``loader`` buckets are fetched on first use."""
        self.context = context
        self._loader = loader
        self._open = True
        self.logs_changes = self.logging and context.captures_changelog(self.name)

    def limit_memory(self, buckets: int, spill: BucketSpill) -> None:
        """Hold at most ``buckets`` buckets in memory: loading or creating another lets go of
        the one held longest, a changed one into ``spill``. Needs a loader (attached by
        :meth:`init`) that gives spilled buckets back."""
        if buckets < 1:
            raise ValueError(f"store {self.name!r}: buckets in memory must be >= 1, got {buckets}")
        self._memory_limit = buckets
        self._spill = spill

    @property
    def memory_limited(self) -> bool:
        """Whether the store holds only some of its buckets in memory at once."""
        return self._memory_limit is not None and self._loader is not None

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def set_flush_listener(self, listener: FlushListener, *, batched: bool = False) -> bool:
        """Register the listener that forwards cached changes; returns whether caching is on.
        ``batched``: the listener takes the list of a flush's changes in one call."""
        self._flush_listener = listener
        self._flush_batched = batched
        return self.caching

    # -- buckets -----------------------------------------------------------------------------
    def _new_bucket(self) -> Any:
        """An empty bucket's data structure."""
        raise NotImplementedError

    def bucket_entries(self, data: Any) -> int:
        """The number of entries in a bucket's ``data`` (for the ``estimate-num-keys``
        metric)."""
        return len(data)

    def _unpack(self, bucket: int, packed: PackedBucket) -> Any:
        """Build ``bucket``'s data from the packed entries it holds, hold it in their place and
        mark the bucket changed (so that it is written back as built)."""
        raise NotImplementedError

    def _on_bucket_loaded(self, bucket: int, data: Any) -> None:
        """Hook for housekeeping on a freshly loaded bucket (e.g. dropping expired segments)."""

    def bucket_of(self, key: Any) -> int:
        if self.num_buckets == 1:
            return 0
        memo = self._memo
        last = memo.last
        if key is last[0]:  # a str or bytes key, so its bucket cannot have changed
            bucket: int = last[1]
            return bucket
        if type(key) is not str and type(key) is not bytes:
            return stable_hash(key) % self.num_buckets
        buckets = memo.buckets
        found = buckets.get(key)
        if found is None:
            if len(buckets) >= _BUCKET_MEMO_SIZE:
                buckets.clear()
            found = buckets[key] = stable_hash(key) % self.num_buckets
        memo.last = (key, found)
        return found

    def buckets_of(self, keys: Sequence[Any]) -> list[int]:
        """The bucket of each of ``keys`` (:meth:`bucket_of` for many keys at once)."""
        n = self.num_buckets
        if n == 1:
            return [0] * len(keys)
        return [h % n for h in stable_hashes(keys)]

    def _bucket_for(self, key: Any, *, create: bool) -> Any | None:
        return self._bucket(self.bucket_of(key), create=create)

    @overload
    def _bucket(self, bucket: int, *, create: Literal[True]) -> Any: ...

    @overload
    def _bucket(self, bucket: int, *, create: bool) -> Any | None: ...

    def _bucket(self, bucket: int, *, create: bool) -> Any | None:
        """The data of ``bucket`` (loaded on first use), created empty if ``create``."""
        data = self._buckets.get(bucket)
        if data is None and self._loader is not None and bucket not in self._fetched:
            self._fetched.add(bucket)
            loaded = self._loader.load(self.name, bucket)
            if loaded is not None:
                self._hold(bucket, loaded)
                data = loaded
                if type(data) is _PACKED:
                    data = self._unpack(bucket, data)
                self._on_bucket_loaded(bucket, data)
        elif type(data) is _PACKED:
            data = self._unpack(bucket, data)
        if data is None and create:
            data = self._new_bucket()
            self._hold(bucket, data)
        return data

    def _hold(self, bucket: int, data: Any) -> None:
        """Keep ``bucket`` in memory, first letting go of the buckets held longest if the
        store's memory is limited."""
        limit = self._memory_limit
        if limit is not None and self._loader is not None:
            while len(self._buckets) >= limit:
                self._let_go(next(iter(self._buckets)))
        self._buckets[bucket] = data

    def _let_go(self, bucket: int) -> None:
        data = self._buckets.pop(bucket)
        self._fetched.discard(bucket)  # the next use loads it again
        if bucket in self._dirty_buckets:
            self._dirty_buckets.discard(bucket)
            assert self._spill is not None  # set with the limit
            self._spill.spill(self.name, bucket, data if data else None)

    def _all_buckets(self) -> Iterator[tuple[int, Any]]:
        """Every bucket that has data, in bucket order (with a loader attached, each is loaded
        on the way; with limited memory only the one yielded is sure to be held)."""
        if self._loader is not None:
            if self._memory_limit is not None:
                for b in range(self.num_buckets):
                    data = self._bucket(b, create=False)
                    if data is not None:
                        yield b, data
                return
            for b in range(self.num_buckets):
                self._bucket(b, create=False)
        for b in sorted(self._buckets):
            yield b, self._bucket(b, create=False)

    def _touch(self, bucket: int) -> None:
        self._dirty_buckets.add(bucket)

    def dirty_buckets(self) -> dict[int, Any]:
        """The data of every bucket changed since :meth:`clear_dirty` (``None``: now empty)."""
        out = {}
        for b in self._dirty_buckets:
            data = self._buckets.get(b)
            out[b] = data if data else None
        return out

    def clear_dirty(self) -> None:
        self._dirty_buckets.clear()

    def unload(self) -> None:
        """Forget every bucket held in memory (the next access loads it again)."""
        self._buckets.clear()
        self._dirty_buckets.clear()
        self._fetched.clear()

    # -- metadata persisted with the buckets --------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """Small per-store state persisted beside the buckets (e.g. observed stream time)."""
        return {}

    def restore_meta(self, meta: dict[str, Any]) -> None:
        """Inverse of :meth:`meta`."""

    # -- writes ------------------------------------------------------------------------------
    def _check_writable(self, key: Any) -> None:
        if self.read_only:
            raise InvalidStateStoreError(f"store {self.name!r} is read-only")
        if key is None:
            raise ValueError(f"store {self.name!r}: key must not be None")

    def _timestamp(self, timestamp: int | None) -> int:
        return self.context.record_timestamp() if timestamp is None else timestamp

    def _changed(self, store_key: Any, old: Any, new: Any, timestamp: int) -> None:
        """Record one change of ``store_key`` (``new is None``: deleted)."""
        if self.caching:
            entry = self._dirty.pop(store_key, None)
            first_old = old if entry is None else entry[0]
            # re-inserted, so that flush order is the order of last update
            self._dirty[store_key] = (first_old, new, timestamp)
        elif self.logging:
            self.context.log_change(self.name, store_key, new, timestamp)

    def _changed_all(self, changes: Iterable[tuple[Any, Any, Any, int]]) -> None:
        """:meth:`_changed` for each ``(store_key, old, new, timestamp)``, in order."""
        if self.caching:
            dirty = self._dirty
            for store_key, old, new, timestamp in changes:
                entry = dirty.pop(store_key, None)
                dirty[store_key] = (old if entry is None else entry[0], new, timestamp)
        elif self.logging:
            log, name = self.context.log_change, self.name
            for store_key, _, new, timestamp in changes:
                log(name, store_key, new, timestamp)

    def _current(self, store_key: Any) -> Any:
        """The live value under ``store_key`` (``None`` if absent or expired)."""
        raise NotImplementedError

    def has_cached_changes(self) -> bool:
        """Whether a commit would flush anything."""
        return bool(self._dirty)

    def flush(self) -> None:
        """Commit: forward each dirty key's ``Change(new, old)`` and log its final value. The
        cached value is forwarded even if it expired from the store since (as Kafka Streams'
        cache does)."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        listener = self._flush_listener
        batch: list[tuple[Any, Any, Any, int]] | None = [] if self._flush_batched else None
        for store_key, (old, new, timestamp) in dirty.items():
            # as Kafka Streams' caching stores: with a flush listener, a key that holds nothing
            # before and after the commit is neither written nor logged
            if self.logging and (listener is None or new is not None or old is not None):
                self.context.log_change(self.name, store_key, new, timestamp)
            if listener is not None and (new is not None or old is not None):
                if batch is None:
                    listener(store_key, new, old, timestamp)
                else:
                    batch.append((store_key, new, old, timestamp))
        if batch and listener is not None:
            listener(batch)

    # -- restoration -------------------------------------------------------------------------
    def restore(self, changelog: Any) -> None:
        """Apply ``(store key, value or None, timestamp)`` changelog entries in order."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
