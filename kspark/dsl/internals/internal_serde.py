"""Serdes of the topics kspark writes for itself (repartition topics).

Internal topics are only read back by kspark, so their default serde round-trips any picklable
Python value exactly (tuples stay tuples, ints stay ints) on the test driver and on Spark alike.
"""

from __future__ import annotations

import struct
from typing import Any

from kspark.records import Change
from kspark.serdes import Pickle, Serde, as_serde

__all__ = ["ChangeSerde", "Pickle"]


class ChangeSerde(Serde):
    """A :class:`~kspark.records.Change` whose new and old values use ``inner``: a flag byte
    (bit 0: new present, bit 1: old present), then each present value as a 4-byte length and
    its bytes."""

    name = "Change"

    def __init__(self, inner: Any) -> None:
        self.inner = as_serde(inner)

    def _serialize(self, value: Any) -> bytes:
        if not isinstance(value, Change):
            raise TypeError("expected Change")
        new = self.inner.serialize(value.new_value)
        old = self.inner.serialize(value.old_value)
        flags = (new is not None) | ((old is not None) << 1)
        out = bytearray([flags])
        for part in (new, old):
            if part is not None:
                out += struct.pack(">I", len(part))
                out += part
        return bytes(out)

    def _deserialize(self, data: bytes) -> Change:
        flags, pos = data[0], 1
        values = []
        for bit in (1, 2):
            if flags & bit:
                (n,) = struct.unpack_from(">I", data, pos)
                pos += 4
                values.append(self.inner.deserialize(data[pos:pos + n]))
                pos += n
            else:
                values.append(None)
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes after a Change")
        return Change(values[0], values[1])

    def __repr__(self) -> str:
        return f"ChangeSerde({self.inner!r})"
