"""Store builders: what ``topology.add_state_store`` takes (docs/api.md, Processor API)."""

from __future__ import annotations

from typing import Any

from kspark._duration import Duration, to_ms
from kspark.state.internals.base import DEFAULT_BUCKETS, StoreBase
from kspark.state.internals.common import check_name
from kspark.state.join_stores import ListValueStore, TimeOrderedBuffer
from kspark.state.key_value import InMemoryKeyValueStore
from kspark.state.session import InMemorySessionStore
from kspark.state.versioned import InMemoryVersionedKeyValueStore
from kspark.state.window import InMemoryWindowStore

_FACTORIES: dict[str, type[StoreBase]] = {
    "key_value": InMemoryKeyValueStore,
    "window": InMemoryWindowStore,
    "session": InMemorySessionStore,
    "list_value": ListValueStore,
    "time_ordered_buffer": TimeOrderedBuffer,
    "versioned": InMemoryVersionedKeyValueStore,
}


class StoreBuilder:
    """Builds a new store of one kind each time :meth:`build` is called.

    ``params`` are the keyword arguments of the store's constructor besides the name, caching,
    logging and bucket count (e.g. ``retention_ms``, ``window_size_ms``). Invalid arguments
    raise ``ValueError`` here, not at build time.
    """

    def __init__(
        self,
        name: str,
        kind: str,
        params: dict[str, Any] | None = None,
        *,
        caching: bool = False,
        logging: bool = True,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> None:
        if kind not in _FACTORIES:
            raise ValueError(f"unknown store kind {kind!r}; expected one of {sorted(_FACTORIES)}")
        self.name = check_name(name)
        self.kind = kind
        self.params: dict[str, Any] = dict(params or {})
        self.caching = caching
        self.logging = logging
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.build(num_buckets=1)  # validates every argument now

    def build(self, num_buckets: int = DEFAULT_BUCKETS) -> StoreBase:
        """A new, empty store."""
        return _FACTORIES[self.kind](
            self.name,
            caching=self.caching,
            logging=self.logging,
            num_buckets=num_buckets,
            **self.params,
        )

    def with_caching_enabled(self) -> StoreBuilder:
        if self.params.get("retain_duplicates"):
            raise ValueError(
                f"store {self.name!r}: caching cannot be enabled with retain_duplicates"
            )
        self.caching = True
        return self

    def with_caching_disabled(self) -> StoreBuilder:
        self.caching = False
        return self

    def with_logging_enabled(self) -> StoreBuilder:
        self.logging = True
        return self

    def with_logging_disabled(self) -> StoreBuilder:
        self.logging = False
        return self

    def __repr__(self) -> str:
        return (
            f"StoreBuilder({self.name!r}, {self.kind!r}, {self.params!r}, "
            f"caching={self.caching}, logging={self.logging})"
        )


def _non_negative(value: Duration, what: str) -> int:
    ms = to_ms(value, what)
    if ms < 0:
        raise ValueError(f"{what} must be >= 0 ms, got {ms}")
    return ms


class Stores:
    """Factories of store builders."""

    @staticmethod
    def key_value_store(
        name: str,
        key_serde: Any = None,
        value_serde: Any = None,
        caching: bool = False,
        logging: bool = True,
    ) -> StoreBuilder:
        """A builder of in-memory key-value stores."""
        return StoreBuilder(
            name,
            "key_value",
            caching=caching,
            logging=logging,
            key_serde=key_serde,
            value_serde=value_serde,
        )

    @staticmethod
    def window_store(
        name: str,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool = False,
        key_serde: Any = None,
        value_serde: Any = None,
        caching: bool = False,
        logging: bool = True,
    ) -> StoreBuilder:
        """A builder of in-memory window stores; ``retention >= window_size >= 0``."""
        check_name(name)
        retention_ms = _non_negative(retention, f"store {name!r}: retention")
        size_ms = to_ms(window_size, f"store {name!r}: window size")
        if size_ms < 0:
            raise ValueError(f"store {name!r}: window size must be >= 0 ms, got {size_ms}")
        params = {
            "retention_ms": retention_ms,
            "window_size_ms": size_ms,
            "retain_duplicates": bool(retain_duplicates),
        }
        return StoreBuilder(
            name,
            "window",
            params,
            caching=caching,
            logging=logging,
            key_serde=key_serde,
            value_serde=value_serde,
        )

    @staticmethod
    def versioned_key_value_store(
        name: str,
        history_retention: Duration,
        key_serde: Any = None,
        value_serde: Any = None,
        logging: bool = True,
    ) -> StoreBuilder:
        """A builder of versioned key-value stores that answer ``get(key, as_of_timestamp)``
        for ``history_retention`` back from the latest time they have seen (no cache)."""
        check_name(name)
        history = _non_negative(history_retention, f"store {name!r}: history retention")
        return StoreBuilder(
            name,
            "versioned",
            {"history_retention_ms": history},
            logging=logging,
            key_serde=key_serde,
            value_serde=value_serde,
        )

    @staticmethod
    def session_store(
        name: str,
        retention: Duration,
        key_serde: Any = None,
        value_serde: Any = None,
        caching: bool = False,
        logging: bool = True,
    ) -> StoreBuilder:
        """A builder of in-memory session stores; ``retention >= 0``."""
        check_name(name)
        retention_ms = _non_negative(retention, f"store {name!r}: retention")
        return StoreBuilder(
            name,
            "session",
            {"retention_ms": retention_ms},
            caching=caching,
            logging=logging,
            key_serde=key_serde,
            value_serde=value_serde,
        )
