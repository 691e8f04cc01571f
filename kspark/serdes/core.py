"""Serdes: bytes <-> values, in Kafka's wire formats. ``None`` passes through both ways.

Failures raise :class:`~kspark.errors.SerializationError` naming the serde and the cause."""

from __future__ import annotations

import contextlib
import copyreg
import pickle
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

from mypy_extensions import mypyc_attr

from kspark._duration import whole
from kspark._json_codec import DECODER, FAST_DECODE, ONE_SHOT, fast_json_bytes, json_text
from kspark.errors import SerializationError
from kspark.record_columns import WindowedKeys
from kspark.serdes.internals.shortcuts import utf8_reader, utf8_writer, with_shortcut
from kspark.windows import Window, Windowed

if TYPE_CHECKING:
    import numpy as np

#: what deserializers take: bytes, or any bytes-like object (a copy is decoded)
Data = bytes | bytearray | memoryview

_LONG: Final = struct.Struct(">q")
_END_START: Final = struct.Struct(">qq")
#: Java's ``Long.MAX_VALUE``: Kafka Streams cuts a time window's end there
MAX_LONG: Final = (1 << 63) - 1


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Serde:
    """Base class: subclasses implement ``_serialize`` and ``_deserialize``."""

    # class attributes that subclasses set (ClassVar: compiled, they stay on the class)
    name: ClassVar[str] = "Serde"
    #: bytes at the end of a serialized key that the partitioner ignores: a windowed key goes
    #: to the partition of its inner key, as Kafka Streams' ``WindowedStreamPartitioner`` sends it
    partition_suffix_bytes: ClassVar[int] = 0

    @property
    def pure(self) -> bool:
        """Whether equal bytes always deserialize to equal values, with no side effect (then a
        batch's column is decoded once per distinct byte string)."""
        return False

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return self._serialize(value)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"{self.name} serde cannot serialize {type(value).__name__} {value!r:.80}: {exc}"
            ) from exc

    def serialize_all(self, values: Sequence[Any]) -> list[bytes | None]:
        """:meth:`serialize` of each value (subclasses may do it faster)."""
        serialize = self.serialize
        return [serialize(v) for v in values]

    def deserialize_all(self, data: Sequence[Data | None]) -> list[Any]:
        """:meth:`deserialize` of each item (subclasses may do it faster, with the same
        results and errors)."""
        deserialize = self.deserialize
        return [deserialize(d) for d in data]

    def deserialize(self, data: Data | None) -> Any:
        if data is None:
            return None
        try:
            return self._deserialize(data if type(data) is bytes else bytes(data))
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"{self.name} serde cannot deserialize {len(data)} bytes "
                f"{bytes(data)[:40]!r}: {exc}"
            ) from exc

    def serializer(self) -> Callable[[Any], bytes | None]:
        """A function equal to :meth:`serialize` (the same results and errors), faster where
        the serde has a shortcut for common values (per-record paths take it once)."""
        return self.serialize

    def deserializer(self) -> Callable[[Any], Any]:
        """A function equal to :meth:`deserialize` (see :meth:`serializer`)."""
        return self.deserialize

    def _serialize(self, value: Any) -> bytes:
        raise NotImplementedError

    def _deserialize(self, data: bytes) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.name}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and _state(self) == _state(other)

    def __ne__(self, other: object) -> bool:
        # declared, not derived: mypyc derives it for each compiled subclass, and in some
        # build orders fails to for one in another module (join_stores)
        return not self == other

    def __reduce__(self) -> tuple[Any, ...]:
        # made without __init__, then given every attribute (a subclass's too)
        return copyreg.__newobj__, (type(self),), _state(self)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(type(self))


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class String(Serde):
    name = "String"

    @property
    def pure(self) -> bool:
        return type(self) is String  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise TypeError("expected str")
        return value.encode("utf-8")

    def _deserialize(self, data: bytes) -> str:
        return data.decode("utf-8")

    def serializer(self) -> Callable[[Any], bytes | None]:
        if type(self) is not String:
            return self.serialize
        return utf8_writer(self.serialize)

    def deserializer(self) -> Callable[[Any], Any]:
        if type(self) is not String:
            return self.deserialize
        return utf8_reader(self.deserialize)

    def serialize_all(self, values: Sequence[Any]) -> list[bytes | None]:
        if type(self) is not String:
            return super().serialize_all(values)
        serialize = self.serialize  # None, other types and errors: the general way
        try:
            return [v.encode() if type(v) is str else serialize(v) for v in values]
        except UnicodeEncodeError:
            return super().serialize_all(values)  # names the item at fault

    def deserialize_all(self, data: Sequence[Data | None]) -> list[Any]:
        if type(self) is not String:
            return super().deserialize_all(data)
        try:
            return [None if d is None else str(d, "utf-8") for d in data]
        except (UnicodeDecodeError, AttributeError):
            return super().deserialize_all(data)  # names the item at fault


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Long(Serde):
    """64-bit signed big-endian integer, as Kafka's ``LongSerde``."""

    name = "Long"

    @property
    def pure(self) -> bool:
        return type(self) is Long  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        n = whole(value)
        if n is None:
            raise TypeError("expected int")
        return _LONG.pack(n)

    def serialize_all(self, values: Sequence[Any]) -> list[bytes | None]:
        pack, serialize = _LONG.pack, self.serialize
        try:
            return [pack(v) if type(v) is int else serialize(v) for v in values]
        except struct.error:
            return super().serialize_all(values)  # the error, as serialize reports it

    def _deserialize(self, data: bytes) -> int:
        if len(data) != 8:
            raise ValueError(f"size of data received by Long deserializer is not 8 but {len(data)}")
        return struct.unpack(">q", data)[0]

    def serializer(self) -> Callable[[Any], bytes | None]:
        if type(self) is not Long:
            return self.serialize
        return with_shortcut(self.serialize, int, _LONG.pack, struct.error)

    def deserializer(self) -> Callable[[Any], Any]:
        if type(self) is not Long:
            return self.deserialize
        general, unpack = self.deserialize, _LONG.unpack

        def deserialize(data: Any) -> Any:
            if type(data) is bytes and len(data) == 8:
                return unpack(data)[0]
            return general(data)

        return deserialize


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Double(Serde):
    name = "Double"

    @property
    def pure(self) -> bool:
        return type(self) is Double  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        return struct.pack(">d", float(value))

    def _deserialize(self, data: bytes) -> float:
        if len(data) != 8:
            raise ValueError(
                f"size of data received by Double deserializer is not 8 but {len(data)}"
            )
        return struct.unpack(">d", data)[0]


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Bytes(Serde):
    name = "Bytes"

    @property
    def pure(self) -> bool:
        return type(self) is Bytes  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError("expected bytes")
        return bytes(value)

    def _deserialize(self, data: bytes) -> bytes:
        return data


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Json(Serde):
    """UTF-8 JSON; any JSON-encodable value."""

    name = "Json"

    @property
    def pure(self) -> bool:
        return type(self) is Json  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        written = fast_json_bytes(value)
        return json_text(value).encode("utf-8") if written is None else written

    def _deserialize(self, data: bytes) -> Any:
        return DECODER.decode(data.decode("utf-8"))

    def serializer(self) -> Callable[[Any], bytes | None]:
        encode = ONE_SHOT
        if type(self) is not Json or encode is None:
            return self.serialize
        general = self.serialize

        def serialize(value: Any) -> bytes | None:
            if value is None:
                return None
            written = fast_json_bytes(value)  # msgspec's bytes where they are Python's
            if written is not None:
                return written
            try:
                return "".join(encode(value, 0)).encode("utf-8")
            except Exception:
                return general(value)  # the error, as serialize reports it

        return serialize

    def deserializer(self) -> Callable[[Any], Any]:
        if type(self) is not Json:
            return self.deserialize
        # msgspec gives what the general way gives for a document it accepts; what it refuses
        # (an error too) goes the general way
        return with_shortcut(self.deserialize, bytes, FAST_DECODE, Exception)


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class SessionWindowed(Serde):
    """``Windowed`` keys of session windows: inner key bytes, then end and start (8 bytes each)."""

    name = "SessionWindowed"
    partition_suffix_bytes = 16

    def __init__(self, inner: Serde) -> None:
        self.inner = as_serde(inner)

    def _serialize(self, value: Any) -> bytes:
        if not isinstance(value, Windowed):
            raise TypeError("expected Windowed")
        key = self.inner.serialize(value.key) or b""
        return key + _END_START.pack(value.window.end, value.window.start)

    def serializer(self) -> Callable[[Any], bytes | None]:
        if type(self) is not SessionWindowed:
            return self.serialize
        inner, pack = serializer_of(self.inner), _END_START.pack

        def fast(value: Windowed) -> bytes:
            window = value.window
            return (inner(value.key) or b"") + pack(window.end, window.start)

        return with_shortcut(self.serialize, Windowed, fast, Exception)

    def serialize_all(self, values: Sequence[Any]) -> list[bytes | None]:
        if type(values) is not list and isinstance(values, WindowedKeys):
            return _windowed_columns(self, values, (values.ends, values.starts))
        return _windowed_all(self, values, lambda w: _END_START.pack(w.end, w.start))

    def _deserialize(self, data: bytes) -> Windowed:
        if len(data) < 16:
            raise ValueError("session-windowed key shorter than 16 bytes")
        end, start = struct.unpack(">qq", data[-16:])
        return Windowed(self.inner.deserialize(data[:-16]), _window(start, end))

    def __repr__(self) -> str:
        return f"SessionWindowed({self.inner!r})"


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class TimeWindowed(Serde):
    """``Windowed`` keys of time windows: inner key bytes, then the start (8 bytes)."""

    name = "TimeWindowed"
    partition_suffix_bytes = 8

    def __init__(self, inner: Serde, window_size: int) -> None:
        self.inner = as_serde(inner)
        self.window_size = int(window_size)

    def _serialize(self, value: Any) -> bytes:
        if not isinstance(value, Windowed):
            raise TypeError("expected Windowed")
        key = self.inner.serialize(value.key) or b""
        return key + _LONG.pack(value.window.start)

    def serialize_all(self, values: Sequence[Any]) -> list[bytes | None]:
        if type(values) is not list and isinstance(values, WindowedKeys):
            return _windowed_columns(self, values, (values.starts,))
        return _windowed_all(self, values, lambda w: _LONG.pack(w.start))

    def _deserialize(self, data: bytes) -> Windowed:
        if len(data) < 8:
            raise ValueError("time-windowed key shorter than 8 bytes")
        (start,) = struct.unpack(">q", data[-8:])
        # as Kafka Streams: an end past Long.MAX_VALUE is cut there, and must exceed the start
        end = min(start + self.window_size, MAX_LONG)
        if end <= start:
            raise ValueError(f"time window end {end} must be greater than its start {start}")
        return Windowed(self.inner.deserialize(data[:-8]), _window(start, end))

    def __repr__(self) -> str:
        return f"TimeWindowed({self.inner!r}, {self.window_size})"


@mypyc_attr(allow_interpreted_subclasses=True)  # users subclass serdes
class Pickle(Serde):
    """Any picklable value, with pickle's highest protocol. For kspark's internal topics only:
    never deserialize data from an untrusted source with it."""

    name = "Pickle"

    @property
    def pure(self) -> bool:
        return type(self) is Pickle  # a subclass may deserialize otherwise

    def _serialize(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def _deserialize(self, data: bytes) -> Any:
        return pickle.loads(data)  # internal topics only

    def deserialize_all(self, data: Sequence[Data | None]) -> list[Any]:
        if type(self) is not Pickle:
            return super().deserialize_all(data)
        loads = pickle.loads
        try:
            return [None if d is None else loads(d) for d in data]
        except Exception:
            return super().deserialize_all(data)  # names the item at fault


def _state(serde: Serde) -> dict[str, Any]:
    """A serde's attributes, what it is compared and pickled by, wherever they are kept: a
    compiled serde's in slots of its own (its ``__getstate__``), a serde defined in Python (a
    user's subclass) in its ``__dict__``."""
    state = dict(cast(dict[str, Any], serde.__getstate__() or {}))
    with contextlib.suppress(TypeError):  # a compiled serde has no __dict__
        state.update(vars(serde))
    return state


def _window(start: int, end: int) -> Window:
    """A decoded window, checked as Kafka Streams' ``Window`` checks it."""
    if start < 0:
        raise ValueError(f"window start {start} is negative")
    return Window(start, end)


def serializer_of(serde: Any) -> Callable[[Any], bytes | None]:
    """``serde.serialize``, or the faster equal function a :class:`Serde` gives."""
    return serde.serializer() if isinstance(serde, Serde) else serde.serialize


def deserializer_of(serde: Any) -> Callable[[Any], Any]:
    """``serde.deserialize``, or the faster equal function a :class:`Serde` gives."""
    return serde.deserializer() if isinstance(serde, Serde) else serde.deserialize


def as_serde(serde: Any) -> Serde:
    """Accept a serde instance or a serde class; reject anything else with a clear error."""
    if isinstance(serde, Serde):
        return serde
    if isinstance(serde, type) and issubclass(serde, Serde):
        return serde()
    if hasattr(serde, "serialize") and hasattr(serde, "deserialize"):
        return serde
    raise TypeError(f"expected a serde (e.g. serdes.String()), got {serde!r}")


def _windowed_columns(serde: Any, keys: WindowedKeys, fields: tuple[np.ndarray, ...]
                      ) -> list[bytes | None]:
    """``serde.serialize`` of each windowed key given as columns: each distinct inner key
    serialized once, then the window's ``fields`` as 8-byte big-endian numbers."""
    import numpy as np

    codes = keys.codes.tolist()
    distinct = list(dict.fromkeys(codes))
    inner = serde.inner.serialize_all([keys.keys[c] for c in distinct])
    encoded = {c: k or b"" for c, k in zip(distinct, inner)}
    width = 8 * len(fields)
    raw = np.stack(fields, axis=1).astype(">i8").tobytes()
    return [encoded[c] + raw[i * width:(i + 1) * width] for i, c in enumerate(codes)]


def _windowed_all(serde: Any, values: Sequence[Any], suffix: Any) -> list[bytes | None]:
    """``serde.serialize`` of each ``Windowed`` value, serializing each distinct inner key once
    (any other value, or an unhashable key, goes through ``serialize``)."""
    inner, serialize = serde.inner.serialize, serde.serialize
    memo: dict[tuple[type, Any], bytes] = {}
    out: list[bytes | None] = []
    for value in values:
        if not isinstance(value, Windowed):
            out.append(serialize(value))
            continue
        try:
            # by type too: equal keys of different types (1, 1.0, True) may serialize apart
            memo_key = (type(value.key), value.key)
            key = memo.get(memo_key)
            if key is None:
                key = memo[memo_key] = inner(value.key) or b""
        except TypeError:
            out.append(serialize(value))
            continue
        try:
            out.append(key + suffix(value.window))
        except struct.error:
            out.append(serialize(value))
    return out
