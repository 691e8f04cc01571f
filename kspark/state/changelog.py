"""Changelog records: the topic name of a store's changelog and how its entries are encoded.

A changelog entry is ``(store key, value or None, timestamp)``. On a topic its key is the store
key in Kafka Streams' layout: the key itself for key-value stores; the key then the window start
(8 bytes big-endian) and a 4-byte sequence number (0 unless duplicates are retained) for window
stores; the key then the session end and start (8 bytes each) for session stores. Keys and
values use the store's serdes, or kspark's internal pickle serde when the store has none.
"""

from __future__ import annotations

import struct
from typing import Any

from kspark.serdes import Pickle, Serde, as_serde
from kspark.windows import Window, Windowed


def changelog_topic(application_id: str, store: str) -> str:
    """Kafka Streams' name for a store's changelog topic."""
    return f"{application_id}-{store}-changelog"


#: Kafka Streams' ``windowstore.changelog.additional.retention.ms`` default: a windowed store's
#: changelog keeps records this long beyond the store's retention
ADDITIONAL_RETENTION_MS = 86_400_000


def changelog_topic_config(builder: Any) -> dict[str, str]:
    """Topic configs of a store's changelog on Kafka, as Kafka Streams sets them: compacted;
    for window and session stores also deleted after the store's retention plus
    :data:`ADDITIONAL_RETENTION_MS`, so that expired windows leave the topic."""
    if builder.kind == "key_value":
        return {"cleanup.policy": "compact"}
    retention = int(builder.params["retention_ms"]) + ADDITIONAL_RETENTION_MS
    return {"cleanup.policy": "compact,delete", "retention.ms": str(retention)}


class ChangelogCodec:
    """Encodes and decodes the changelog entries of one store."""

    def __init__(
        self,
        kind: str,
        key_serde: Any = None,
        value_serde: Any = None,
        window_size_ms: int | None = None,
        retain_duplicates: bool = False,
    ) -> None:
        self.kind = kind
        self.key_serde: Serde = as_serde(key_serde) if key_serde is not None else Pickle()
        self.value_serde: Serde = as_serde(value_serde) if value_serde is not None else Pickle()
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates

    @classmethod
    def for_builder(cls, builder: Any) -> ChangelogCodec:
        return cls(
            builder.kind,
            builder.key_serde,
            builder.value_serde,
            builder.params.get("window_size_ms"),
            bool(builder.params.get("retain_duplicates", False)),
        )

    def encode_key(self, store_key: Any) -> bytes:
        if self.kind == "key_value":
            return self.key_serde.serialize(store_key) or b""
        seq = 0
        if self.kind == "window" and self.retain_duplicates:
            store_key, seq = store_key
        inner = self.key_serde.serialize(store_key.key) or b""
        window = store_key.window
        if self.kind == "session":
            return inner + struct.pack(">qq", window.end, window.start)
        return inner + struct.pack(">qi", window.start, seq)

    def decode_key(self, data: bytes) -> Any:
        if self.kind == "key_value":
            return self.key_serde.deserialize(data)
        if self.kind == "session":
            end, start = struct.unpack(">qq", data[-16:])
            return Windowed(self.key_serde.deserialize(data[:-16]), Window(start, end))
        start, seq = struct.unpack(">qi", data[-12:])
        windowed = Windowed(
            self.key_serde.deserialize(data[:-12]),
            Window(start, start + (self.window_size_ms or 0)),
        )
        return (windowed, seq) if self.retain_duplicates else windowed

    def encode_value(self, value: Any) -> bytes | None:
        return self.value_serde.serialize(value)

    def decode_value(self, data: bytes | None) -> Any:
        return self.value_serde.deserialize(data)


class ChangelogKeySerde(Serde):
    """Reads (and writes) changelog keys as store keys with a :class:`ChangelogCodec`: the key
    serde of a source topic that is another store's changelog."""

    name = "ChangelogKey"

    def __init__(self, codec: ChangelogCodec) -> None:
        self.codec = codec

    def _serialize(self, value: Any) -> bytes:
        return self.codec.encode_key(value)

    def _deserialize(self, data: bytes) -> Any:
        return self.codec.decode_key(data)


class ChangelogValueSerde(Serde):
    """Reads (and writes) changelog values with a :class:`ChangelogCodec`."""

    name = "ChangelogValue"

    def __init__(self, codec: ChangelogCodec) -> None:
        self.codec = codec

    def _serialize(self, value: Any) -> bytes:
        return self.codec.encode_value(value) or b""

    def _deserialize(self, data: bytes) -> Any:
        return self.codec.decode_value(data)
