"""How a join keeps its data: ``StreamJoined`` (stream-stream joins) and ``Joined``
(stream-table joins), as Kafka Streams names them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kspark._duration import Duration, to_ms


@dataclass(frozen=True)
class StreamJoined:
    """The stores of a stream-stream join.

    ``store_name`` names them (``<name>-this-join-store``, ``<name>-other-join-store``, and for
    left and outer joins ``<name>-left-shared-join-store`` / ``<name>-outer-shared-join-store``;
    ``None``: generated names). ``key_serde``, ``value_serde`` (this stream's values) and
    ``other_value_serde`` serialize the stores' changelogs and, when a side must be
    repartitioned, its repartition topic; ``None``: the streams' known serdes, else the
    application's defaults. ``logging=False`` keeps no changelogs."""

    store_name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    logging: bool = True
    name: str | None = None

    def __post_init__(self) -> None:
        for what in ("store_name", "name"):
            value = getattr(self, what)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"StreamJoined {what} must be a non-empty string, got {value!r}")

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None,
              other_value_serde: Any = None) -> StreamJoined:
        """Kafka Streams' ``StreamJoined.with(keySerde, valueSerde, otherValueSerde)``."""
        return cls(key_serde=key_serde, value_serde=value_serde,
                   other_value_serde=other_value_serde)

    def with_store_name(self, store_name: str) -> StreamJoined:
        return replace(self, store_name=store_name)

    def with_name(self, name: str) -> StreamJoined:
        """Name the join's processors (``<name>-this-windowed``, ``<name>-this-join``, ...,
        ``<name>-merge``) and repartition topics (``<name>-left-repartition``,
        ``<name>-right-repartition``), as Kafka Streams' ``StreamJoined.withName``; the stores
        keep generated names unless :meth:`with_store_name` names them."""
        return replace(self, name=name)

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging=False)

    def with_logging_enabled(self) -> StreamJoined:
        return replace(self, logging=True)


@dataclass(frozen=True)
class Joined:
    """A stream-table join's serdes (``key_serde``, ``value_serde`` of the stream,
    ``other_value_serde`` of the table: used when the stream is repartitioned) and its grace
    period: with ``grace``, stream records wait in a buffer until stream time has passed
    their timestamp by ``grace`` and then join the table's value as of their timestamp; this
    needs a versioned table."""

    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    grace: Duration | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.grace is not None and to_ms(self.grace, "grace") < 0:
            raise ValueError(f"Joined grace must be >= 0 ms, got {self.grace!r}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ValueError(f"Joined name must be a non-empty string, got {self.name!r}")

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None,
              other_value_serde: Any = None) -> Joined:
        """Kafka Streams' ``Joined.with(keySerde, valueSerde, otherValueSerde)``."""
        return cls(key_serde, value_serde, other_value_serde)

    @property
    def grace_ms(self) -> int | None:
        return None if self.grace is None else to_ms(self.grace, "grace")

    def with_grace_period(self, grace: Duration) -> Joined:
        return replace(self, grace=grace)

    def with_name(self, name: str) -> Joined:
        """Name the join's node ``name``, its repartition topic ``<name>-repartition`` and its
        grace buffer ``<name>-Buffer`` (Kafka Streams' ``Joined.withName``)."""
        return replace(self, name=name)
