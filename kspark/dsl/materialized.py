"""How a DSL operator materializes its result: store name, retention, caching, logging."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kspark._duration import Duration, to_ms


@dataclass(frozen=True)
class Materialized:
    """Names (and configures) the store behind a KTable or an aggregation.

    ``name`` is the store name (``None``: a generated name); ``retention`` applies to window and
    session stores only (default: the windows' size/gap + grace; smaller is an error).
    ``versioned_history`` makes a table's store a versioned one keeping that much history
    (docs/semantics.md §9.2; no cache).
    ``caching`` (default on) combines updates of a key until the next commit; ``logging``
    (default on) keeps a changelog. ``key_serde`` / ``value_serde`` are handed to the store
    builder. Anywhere ``materialized=`` is accepted, a plain store name (``str``) works too.
    """

    name: str | None = None
    retention: Duration | None = None
    caching: bool = True
    logging: bool = True
    key_serde: Any = None
    value_serde: Any = None
    versioned_history: Duration | None = None

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ValueError(f"store name must be a non-empty string, got {self.name!r}")
        for what in ("retention", "versioned_history"):
            value = getattr(self, what)
            if value is not None and to_ms(value, what) < 0:
                raise ValueError(f"{what} must be >= 0 ms, got {value!r}")

    @classmethod
    def as_(cls, name: str) -> Materialized:
        """A ``Materialized`` naming the store ``name`` (Kafka Streams' ``Materialized.as``)."""
        return cls(name)

    @property
    def retention_ms(self) -> int | None:
        """The retention in ms, or ``None`` for the default."""
        return None if self.retention is None else to_ms(self.retention, "retention")

    def with_caching_disabled(self) -> Materialized:
        return _replace(self, caching=False)

    def with_caching_enabled(self) -> Materialized:
        return _replace(self, caching=True)

    def with_logging_disabled(self) -> Materialized:
        return _replace(self, logging=False)

    def with_logging_enabled(self) -> Materialized:
        return _replace(self, logging=True)

    def with_retention(self, retention: Duration) -> Materialized:
        return _replace(self, retention=retention)

    def with_versioned_history(self, history: Duration) -> Materialized:
        """A versioned store keeping ``history`` (Kafka Streams'
        ``Materialized.as(Stores.persistentVersionedKeyValueStore(name, history))``)."""
        return _replace(self, versioned_history=history)


def with_default_serdes(m: Materialized | None, key_serde: Any, value_serde: Any
                        ) -> Materialized:
    """``m`` (or a default ``Materialized``) with ``key_serde`` / ``value_serde`` where it
    names none: the serdes a DSL operator gives its store unless the user chose others."""
    m = m or Materialized()
    return replace(m, key_serde=m.key_serde if m.key_serde is not None else key_serde,
                   value_serde=m.value_serde if m.value_serde is not None else value_serde)


def _replace(m: Materialized, **changes: Any) -> Materialized:
    return replace(m, **changes)


def as_materialized(materialized: Materialized | str | None) -> Materialized | None:
    """Accept a :class:`Materialized`, a store name or ``None``."""
    if materialized is None or isinstance(materialized, Materialized):
        return materialized
    if isinstance(materialized, str):
        return Materialized(materialized)
    raise TypeError(f"materialized must be a Materialized or a store name, got {materialized!r}")
