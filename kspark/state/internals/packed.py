"""A bucket of a window or session store restored in bulk, kept as columns until it is used.

A changelog restored into a bucket that holds nothing needs no merging with what the bucket
holds: what it leaves is each ``(key, segment, sub key)``'s last write, unless that write is a
delete. :class:`PackedBucket` keeps exactly those entries as sorted columns, which the runtime
persists as they are (a few arrays and two lists pickle far faster than a sorted dict per
segment, a dict per key and a tuple per entry). The store builds its usual layout from them
the first time it uses the bucket (``SegmentedStore._unpack``, by the same code that applies
restored writes to a bucket that has data) and writes the bucket back in that layout at the
next commit: a bucket that is never read is never built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: key types that are always ordered among themselves and hash as their values compare
_PLAIN = (str, bytes, int)


def key_codes(keys: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """A code per key (equal keys, equal codes) and the distinct keys the codes index. Raises
    ``TypeError`` when the keys cannot be ordered among themselves, as a store's sorted
    segments need."""
    first = type(keys[0])
    if first in _PLAIN and all(type(k) is first for k in keys):
        import pandas as pd

        column = np.empty(len(keys), dtype=object)
        column[:] = keys
        codes, uniques = pd.factorize(column)
        return codes.astype(np.int64, copy=False), uniques.tolist()
    index: dict[Any, int] = {}
    add = index.setdefault
    codes = np.fromiter((add(k, len(index)) for k in keys), np.int64, len(keys))
    distinct = list(index)
    sorted(distinct)  # the error a segment would raise, now rather than when it is built
    return codes, distinct


@dataclass(slots=True, eq=False)
class PackedBucket:
    """Entries of one bucket as columns, sorted by segment, key code and sub key, one per
    ``(segment, key, sub key)``, none deleted. Entry ``i`` is key ``keys[codes[i]]`` in
    segment ``segs[i]``, sub key ``(sub_hi[i], sub_lo[i])``, holding ``(values[i],
    timestamps[i])``."""

    keys: list[Any]
    codes: np.ndarray
    segs: np.ndarray
    sub_hi: np.ndarray
    sub_lo: np.ndarray
    values: list[Any]
    timestamps: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"PackedBucket({len(self)} entries, {len(self.keys)} keys)"


def pack(keys: list[Any], codes: np.ndarray, segs: np.ndarray, sub_hi: np.ndarray,
         sub_lo: np.ndarray, values: Sequence[Any], rows: np.ndarray, timestamps: np.ndarray
         ) -> PackedBucket | None:
    """What writes to an empty bucket leave, packed. Write ``i`` is to key ``keys[codes[i]]``
    (one code per distinct key), segment ``segs[i]``, sub key ``(sub_hi[i], sub_lo[i])``, of
    value ``values[rows[i]]`` (``None`` deletes) at ``timestamps[i]``; the writes are sorted by
    segment, key code and sub key, a key's writes to one sub key in the order they were made.
    ``None`` when nothing is left."""
    n = len(codes)
    last = np.ones(n, dtype=bool)
    last[:-1] = ((segs[1:] != segs[:-1]) | (codes[1:] != codes[:-1])
                 | (sub_hi[1:] != sub_hi[:-1]) | (sub_lo[1:] != sub_lo[:-1]))
    kept = np.flatnonzero(last)
    picked = [values[i] for i in rows[kept].tolist()]
    if any(v is None for v in picked):
        live = np.fromiter((v is not None for v in picked), dtype=bool, count=len(picked))
        kept = kept[live]
        picked = [v for v in picked if v is not None]
    if not len(kept):
        return None
    used, inner = np.unique(codes[kept], return_inverse=True)
    return PackedBucket([keys[c] for c in used.tolist()], inner.astype(np.int64), segs[kept],
                        sub_hi[kept], sub_lo[kept], picked, timestamps[kept])
