"""What the test driver keeps for a long run (unread output records, changelog entries), held
so that it costs the garbage collector next to nothing.

A kept record is a plain tuple of bytes, ints and the like, which CPython's collector stops
tracking; but a full collection still visits every item of a container it tracks, so a deque of
a million unread records made each full collection touch a million objects. The queue keeps its
records in tuples of up to :data:`CHUNK` records, which the collector stops tracking in turn, so
it visits one item per chunk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

#: records per chunk
CHUNK = 256


class ChunkedQueue(Generic[T]):
    """A first-in first-out queue of records, kept in tuples of up to :data:`CHUNK` records."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._head: tuple[T, ...] = ()  # the chunk being read
        self._next = 0  # position of the oldest unread record in _head
        self._chunks: deque[tuple[T, ...]] = deque()  # full chunks, oldest first
        self._in_chunks = 0  # records in _chunks
        self._tail: list[T] = []  # the newest records, fewer than CHUNK

    def append(self, item: T) -> None:
        tail = self._tail
        tail.append(item)
        if len(tail) >= CHUNK:
            self._seal()

    def extend(self, items: Iterable[T]) -> None:
        self._tail.extend(items)
        if len(self._tail) >= CHUNK:
            self._seal()

    def _seal(self) -> None:
        """Move the tail's full chunks to the chunks."""
        tail = self._tail
        full = len(tail) - len(tail) % CHUNK
        self._chunks.extend(tuple(tail[i:i + CHUNK]) for i in range(0, full, CHUNK))
        self._in_chunks += full
        self._tail = tail[full:]

    def popleft(self) -> T:
        """The oldest record, taken off the queue; ``IndexError`` when it is empty."""
        if self._next >= len(self._head):
            if self._chunks:
                self._head = self._chunks.popleft()
                self._in_chunks -= len(self._head)
            elif self._tail:
                self._head, self._tail = tuple(self._tail), []
            else:
                raise IndexError("pop from an empty queue")
            self._next = 0
        item = self._head[self._next]
        self._next += 1
        return item

    def take_all(self) -> list[T]:
        """Every record, oldest first, taken off the queue."""
        out = list(self._head[self._next:])
        for chunk in self._chunks:
            out += chunk
        out += self._tail
        self._reset()
        return out

    def __len__(self) -> int:
        return len(self._head) - self._next + self._in_chunks + len(self._tail)

    def __bool__(self) -> bool:
        return self._next < len(self._head) or bool(self._chunks) or bool(self._tail)
