"""Stable hashing: the same key maps to the same bucket in every process (Python's ``hash`` of
``str`` is randomised per process, so it cannot be used for anything persisted)."""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any


def stable_hash(key: Any) -> int:
    """A non-negative 32-bit hash of ``key`` that is identical across processes and runs."""
    return zlib.crc32(_key_bytes(key))


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, bool):
        return b"b1" if key else b"b0"
    if isinstance(key, int):
        return b"i" + str(key).encode()
    if isinstance(key, float):
        return b"f" + struct.pack(">d", key)
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
