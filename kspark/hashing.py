"""Stable hashing: the same key maps to the same bucket in every process (Python's ``hash`` of
``str`` is randomised per process, so it cannot be used for anything persisted)."""

from __future__ import annotations

import pickle
import struct
import zlib
from collections.abc import Iterable
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def stable_hash(key: Any) -> int:
    """A non-negative 32-bit hash of ``key`` that is identical across processes and runs."""
    return zlib.crc32(_key_bytes(key))


def stable_hashes(keys: Iterable[Any]) -> list[int]:
    """:func:`stable_hash` of each of ``keys`` (``str`` keys without a call each)."""
    crc, out = zlib.crc32, []
    for key in keys:
        if type(key) is str:
            out.append(crc(b"s" + key.encode("utf-8", "surrogatepass")))
        else:
            out.append(crc(_key_bytes(key)))
    return out


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, bool):
        return b"b1" if key else b"b0"
    if isinstance(key, int):
        return b"i" + str(key).encode()
    if isinstance(key, float):
        return b"f" + struct.pack(">d", key)
    if isinstance(key, Integral):  # numpy's and pandas' integers hash as the int they hold
        return b"i" + str(int(key)).encode()
    if isinstance(key, Real):
        return b"f" + struct.pack(">d", float(key))
    if isinstance(key, bytes):
        return b"y" + key
    if key is None:
        return b"n"
    if isinstance(key, tuple):
        return b"t" + b"\x00".join(_key_bytes(k) for k in key)
    return b"p" + pickle.dumps(key, protocol=4)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` (as used by its default partitioner), signed 32-bit."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    h = (seed ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    tail = n4 * 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null serialized key."""
    return (murmur2(key_bytes) & 0x7FFFFFFF) % num_partitions


def kafka_partitions(keys: list[bytes], num_partitions: int) -> list[int]:
    """:func:`kafka_partition` of each non-null serialized key, computed with numpy over the
    keys of each length at once."""
    import numpy as np

    if not keys:
        return []
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    return kafka_partitions_packed(data, offsets, num_partitions).tolist()


def kafka_partitions_packed(data: np.ndarray, offsets: np.ndarray,
                            num_partitions: int) -> np.ndarray:
    """:func:`kafka_partition` of each key of a packed column (key ``i`` is the bytes
    ``data[offsets[i]:offsets[i + 1]]``, as an Arrow binary array holds them): an int64 array."""
    import numpy as np

    starts = np.asarray(offsets[:-1], dtype=np.int64)
    lengths = np.asarray(offsets[1:], dtype=np.int64) - starts
    out = np.zeros(len(starts), dtype=np.int64)
    for length in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == length)
        rows = data[starts[idx, None] + np.arange(length)]
        hashes = _murmur2_rows(rows, length)
        out[idx] = (hashes & 0x7FFFFFFF) % num_partitions
    return out


def _murmur2_rows(rows: np.ndarray, length: int) -> np.ndarray:
    """Kafka's murmur2 of each row of a ``(n, length)`` uint8 array, unsigned 32-bit."""
    import numpy as np

    m = np.uint32(0x5BD1E995)
    h = np.full(len(rows), (0x9747B28C ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    n4 = length // 4
    if n4:
        blocks = np.ascontiguousarray(rows[:, : n4 * 4]).view("<u4")
        for i in range(n4):
            k = blocks[:, i] * m
            k ^= k >> np.uint32(24)
            k *= m
            h *= m
            h ^= k
    tail = rows[:, n4 * 4 :].astype(np.uint32)
    rest = length & 3
    if rest == 3:
        h ^= tail[:, 2] << np.uint32(16)
    if rest >= 2:
        h ^= tail[:, 1] << np.uint32(8)
    if rest >= 1:
        h ^= tail[:, 0]
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.astype(np.int64)
