"""Changelog records: the topic name of a store's changelog and how its entries are encoded.

A changelog entry is ``(store key, value or None, timestamp)``. On a topic its key is the store
key in Kafka Streams' layout: the key itself for key-value stores; the key then the window start
(8 bytes big-endian) and a 4-byte sequence number (0 unless duplicates are retained) for window
stores; the key then the session end and start (8 bytes each) for session stores. Keys and
values use the store's serdes, or kspark's internal pickle serde when the store has none.

Decoding checks the layout as far as the bytes allow: a key too short for the store's kind, a
window sequence number other than 0 in a store without duplicates, or a window that Kafka Streams
could not build (negative start, end before start) raises ``ValueError`` naming the store. Read
as a source (:class:`ChangelogKeySerde`), the error names the topic, partition and offset too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from kspark.serdes import Data, Pickle, Serde, as_serde
from kspark.windows import Window, Windowed


def changelog_topic(application_id: str, store: str) -> str:
    """Kafka Streams' name for a store's changelog topic."""
    return f"{application_id}-{store}-changelog"


#: the store kinds whose changelog key is the store key, serialized with the store's key serde
KEY_VALUE_KINDS = ("key_value", "list_value", "versioned", "time_ordered_buffer")

#: Kafka Streams' ``windowstore.changelog.additional.retention.ms`` default: a windowed store's
#: changelog keeps records this long beyond the store's retention
ADDITIONAL_RETENTION_MS = 86_400_000


def changelog_topic_config(builder: Any) -> dict[str, str]:
    """Topic configs of a store's changelog on Kafka, as Kafka Streams sets them: compacted;
    for window and session stores also deleted after the store's retention plus
    :data:`ADDITIONAL_RETENTION_MS`, so that expired windows leave the topic."""
    if builder.kind == "versioned":  # history stays until it is past the retention
        lag = int(builder.params["history_retention_ms"]) + ADDITIONAL_RETENTION_MS
        return {"cleanup.policy": "compact", "min.compaction.lag.ms": str(lag)}
    if builder.kind in KEY_VALUE_KINDS:
        return {"cleanup.policy": "compact"}
    retention = int(builder.params["retention_ms"]) + ADDITIONAL_RETENTION_MS
    # a window store with duplicates (a stream-stream join's) is not compacted: each of its
    # changelog keys is unique (Kafka Streams sets "delete" alone)
    policy = "delete" if builder.params.get("retain_duplicates") else "compact,delete"
    return {"cleanup.policy": policy, "retention.ms": str(retention)}


class ChangelogCodec:
    """Encodes and decodes the changelog entries of one store."""

    def __init__(
        self,
        kind: str,
        key_serde: Any = None,
        value_serde: Any = None,
        window_size_ms: int | None = None,
        retain_duplicates: bool = False,
        store: str | None = None,
    ) -> None:
        self.kind = kind
        self.key_serde: Serde = as_serde(key_serde) if key_serde is not None else Pickle()
        self.value_serde: Serde = as_serde(value_serde) if value_serde is not None else Pickle()
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.store = store

    @classmethod
    def for_builder(cls, builder: Any) -> ChangelogCodec:
        return cls(
            builder.kind,
            builder.key_serde,
            builder.value_serde,
            builder.params.get("window_size_ms"),
            bool(builder.params.get("retain_duplicates", False)),
            builder.name,
        )

    @property
    def pure(self) -> bool:
        """Whether its key and value serdes are (see ``Serde.pure``)."""
        return bool(self.key_serde.pure and (self.value_serde is None or self.value_serde.pure))

    def describe(self) -> str:
        """``store 'name' (window store)``: how errors name the store."""
        return f"store {self.store!r} ({self.kind} store)"

    def encode_key(self, store_key: Any) -> bytes:
        if self.kind in KEY_VALUE_KINDS:
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
        """The store key of a changelog key; ``ValueError`` naming the store if the bytes do not
        fit the store's layout (see the module's documentation)."""
        if self.kind in KEY_VALUE_KINDS:
            return self._inner_key(data)
        if self.kind == "session":
            self._check_length(data, 16, "key bytes, session end and start (8 bytes each)")
            end, start = struct.unpack(">qq", data[-16:])
            return Windowed(self._inner_key(data[:-16]), self._window(start, end, data))
        self._check_length(
            data, 12, "key bytes, window start (8 bytes) and sequence number (4 bytes)"
        )
        start, seq = struct.unpack(">qi", data[-12:])
        if seq != 0 and not self.retain_duplicates:
            raise ValueError(
                f"{self.describe()}: changelog key {data[:40].hex()} ends in sequence number "
                f"{seq}, not 0 as in a window store without duplicates: the topic is not this "
                "store's changelog (another kind of store, or other serdes?)"
            )
        windowed = Windowed(
            self._inner_key(data[:-12]),
            self._window(start, start + (self.window_size_ms or 0), data),
        )
        return (windowed, seq) if self.retain_duplicates else windowed

    def decode_keys(self, data: list[bytes]) -> list[Any]:
        """:meth:`decode_key` of each item, a window store's in bulk: the same store keys, and
        for bytes that do not fit, the same error."""
        columns = self.decode_window_columns(data)
        if columns is None:
            return [self.decode_key(d) for d in data]
        size = self.window_size_ms or 0
        return [Windowed(k, Window(start, start + size))
                for k, start in zip(columns[0], columns[1].tolist())]

    def decode_window_columns(
        self, data: Sequence[Any] | np.ndarray
    ) -> tuple[list[Any], np.ndarray] | None:
        """The keys and window starts of a window store's changelog keys, in bulk, without a
        store key object each; ``None`` when that cannot be done (a store with duplicates, a
        missing key, or any key that :meth:`decode_key` would reject: it names the error)."""
        if self.kind != "window" or self.retain_duplicates or not len(data):
            return None
        if any(d is None for d in data):
            return None
        lengths = np.fromiter(map(len, data), np.int64, len(data))
        if int(lengths.min()) < 12:
            return None
        joined = np.frombuffer(b"".join(data), dtype=np.uint8)
        tails = joined[(np.cumsum(lengths) - 12)[:, None] + np.arange(12)]
        starts = tails[:, :8].copy().view(">i8").ravel().astype(np.int64)
        if bool((tails[:, 8:] != 0).any()) or int(starts.min()) < 0:
            return None
        try:
            keys = self.key_serde.deserialize_all([d[:-12] for d in data])
        except Exception:
            return None
        return keys, starts

    def decode_values(self, data: Sequence[Any] | np.ndarray) -> list[Any] | None:
        """:meth:`decode_value` of each item in bulk; ``None`` if one does not decode."""
        try:
            return self.value_serde.deserialize_all(list(data))
        except Exception:
            return None

    def _check_length(self, data: bytes, least: int, layout: str) -> None:
        if len(data) < least:
            raise ValueError(
                f"{self.describe()}: changelog key of {len(data)} bytes ({data[:40].hex()}) is "
                f"shorter than the layout of the store's keys ({layout}: at least {least} bytes)"
            )

    def _window(self, start: int, end: int, data: bytes) -> Window:
        if start < 0 or end < start:
            raise ValueError(
                f"{self.describe()}: changelog key {data[:40].hex()} holds the window "
                f"[{start}, {end}], which no {self.kind} store writes: the topic is not this "
                "store's changelog (another kind of store, or other serdes?)"
            )
        return Window(start, end)

    def _inner_key(self, data: bytes) -> Any:
        try:
            return self.key_serde.deserialize(data)
        except Exception as exc:
            raise ValueError(f"{self.describe()}: changelog key: {exc}") from exc

    def encode_value(self, value: Any) -> bytes | None:
        return self.value_serde.serialize(value)

    def decode_value(self, data: bytes | None) -> Any:
        try:
            return self.value_serde.deserialize(data)
        except Exception as exc:
            raise ValueError(f"{self.describe()}: changelog value: {exc}") from exc


class _CodecSerde(Serde):
    """A serde over a :class:`ChangelogCodec`: pure when the codec's serdes are."""

    def __init__(self, codec: ChangelogCodec) -> None:
        self.codec = codec

    @property
    def pure(self) -> bool:
        return self.codec.pure


class ChangelogKeySerde(_CodecSerde):
    """Reads (and writes) changelog keys as store keys with a :class:`ChangelogCodec`: the key
    serde of a source topic that is another store's changelog."""

    name = "ChangelogKey"

    def _serialize(self, value: Any) -> bytes:
        return self.codec.encode_key(value)

    def _deserialize(self, data: bytes) -> Any:
        return self.codec.decode_key(data)

    def deserialize_all(self, data: Sequence[Data | None]) -> list[Any]:
        if any(d is None for d in data):
            return super().deserialize_all(data)
        try:
            return self.codec.decode_keys([bytes(d) for d in data if d is not None])
        except Exception:
            return super().deserialize_all(data)  # the error of the item at fault


class ChangelogValueSerde(_CodecSerde):
    """Reads (and writes) changelog values with a :class:`ChangelogCodec`."""

    name = "ChangelogValue"

    def _serialize(self, value: Any) -> bytes:
        return self.codec.encode_value(value) or b""

    def _deserialize(self, data: bytes) -> Any:
        return self.codec.decode_value(data)
