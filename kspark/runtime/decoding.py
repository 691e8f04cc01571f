"""Deserializing a column of keys or values once per distinct byte string (the batch path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kspark.errors import SerializationError
from kspark.runtime.serialized import Encoded, SourceBatch
from kspark.windows import Window, Windowed

#: serdes whose ``deserialize`` is a pure function of the bytes: decoded once per distinct value
_IMMUTABLE = (str, int, float, bool, bytes, type(None))
_FLAT_CONTAINERS = (dict, list)


def _frozen(value: Any) -> bool:
    """Whether ``value`` cannot change: an immutable built-in, or a window, windowed key or
    tuple of such."""
    kind = type(value)
    if kind in _IMMUTABLE or kind is Window:
        return True
    if kind is Windowed:
        return _frozen(value.key)
    return kind is tuple and all(_frozen(v) for v in value)


def _is_flat(value: Any) -> bool:
    """Immutable, or a dict or list whose items are immutable (a shallow copy is a deep one)."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return True
    if kind is dict:
        return all(type(v) in _IMMUTABLE for v in value.values())
    if kind is list:
        return all(type(v) in _IMMUTABLE for v in value)
    return False


class DecodedColumn:
    """A deserialized key or value column: ``codes`` index ``uniques`` (-1: ``None``)."""

    __slots__ = ("codes", "flat", "immutable", "raw", "serde", "uniques")

    def __init__(
        self,
        codes: np.ndarray,
        uniques: list[Any],
        raw: Any,
        serde: Any,
        immutable: bool,
        flat: bool = False,
    ) -> None:
        self.codes = codes
        self.uniques = uniques
        self.raw = raw
        self.serde = serde
        self.immutable = immutable
        #: every value is immutable or a dict or list of immutable items: a shallow copy is
        #: a fresh object equal to a new decode
        self.flat = flat

    def value(self, i: int) -> Any:
        """The deserialized value of record ``i`` (a fresh object unless immutable)."""
        code = self.codes[i]
        if code < 0:
            return None
        if self.immutable:
            return self.uniques[code]
        if self.flat:
            value = self.uniques[code]
            return value.copy() if type(value) in _FLAT_CONTAINERS else value
        return self.serde.deserialize(self.raw[i])


def decode_column(raw: Any, serde: Any, *, dedupe: bool, encoded: Encoded | None = None
                  ) -> DecodedColumn | None:
    """Deserialize a column once per distinct byte string (pure built-in serdes only). With
    ``dedupe``, byte strings that decode to equal values must be distinct values (else
    ``None``). ``None`` also when a value does not decode (the record path reports it).
    ``encoded`` (the same column as codes, see :data:`Encoded`) gives the same result faster."""
    import pandas as pd

    if not serde.pure:
        return None
    if encoded is None:
        codes, uniq = pd.factorize(np.asarray(raw, dtype=object), use_na_sentinel=True)
    else:
        # the codes renumbered in order of first appearance, as factorizing the bytes does
        raw_codes, raw_uniques = encoded
        valid = raw_codes >= 0
        codes = np.full(len(raw_codes), -1, dtype=np.int64)
        codes[valid], first = pd.factorize(raw_codes[valid])
        uniq = raw_uniques[first]
    try:
        decoded = serde.deserialize_all(uniq)
    except (SerializationError, ValueError):
        return None
    codes = codes.astype(np.int64, copy=False)
    nulls = [i for i, d in enumerate(decoded) if d is None]
    if nulls:
        codes = np.where(np.isin(codes, nulls), -1, codes)
    immutable = all(_frozen(d) for d in decoded)
    flat = not immutable and all(_is_flat(d) for d in decoded)
    if dedupe:
        try:
            distinct = {d for d in decoded if d is not None}
        except TypeError:
            return None
        if len(distinct) != len(decoded) - len(nulls):
            return None
    return DecodedColumn(codes, decoded, raw, serde, immutable, flat)


def decode_batch(batch: SourceBatch, key_serde: Any, value_serde: Any
                 ) -> tuple[DecodedColumn, DecodedColumn] | None:
    """The keys (see :func:`decode_column` with ``dedupe``) and values of ``batch`` decoded,
    or ``None`` when either cannot be."""
    keys = decode_column(batch.keys, key_serde, dedupe=True, encoded=batch.encoded_keys)
    if keys is None:
        return None
    values = decode_column(batch.values, value_serde, dedupe=False, encoded=batch.encoded_values)
    return None if values is None else (keys, values)
