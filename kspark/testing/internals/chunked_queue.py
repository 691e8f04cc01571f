"""What the test driver keeps for a long run (unread output records, changelog entries), held
so that it costs the garbage collector next to nothing.

A kept row is not an object of its own: its fields go to columns (one list per field), so a
million kept rows add no object that the collector tracks, and do not make it run more often.
Full columns are sealed into tuples of up to :data:`CHUNK` items, which the collector stops
tracking when they hold only plain values (bytes, ints and the like), so a full collection
visits one item per chunk, not one per row.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final

#: rows per chunk
CHUNK: Final = 256

Row = tuple[Any, ...]


class ChunkedQueue:
    """A first-in first-out queue of rows of ``width`` fields, kept as columns in chunks."""

    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError(f"a row has at least one field, not {width}")
        self.width = width
        self._reset()

    def _reset(self) -> None:
        self._head: tuple[tuple[Any, ...], ...] = ()  # the columns of the chunk being read
        self._head_len = 0
        self._next = 0  # position of the oldest unread row in _head
        self._chunks: deque[tuple[tuple[Any, ...], ...]] = deque()  # full, oldest first
        self._in_chunks = 0  # rows in _chunks
        self._tail: list[list[Any]] = [[] for _ in range(self.width)]  # fewer than CHUNK rows

    def _check(self, n: int) -> None:
        if n != self.width:
            raise ValueError(f"a row of this queue has {self.width} fields, not {n}")

    def append(self, row: Row) -> None:
        """Add ``row`` (``width`` fields) at the end."""
        tail = self._tail
        if len(row) != len(tail):
            self._check(len(row))
        for column, item in zip(tail, row):
            column.append(item)
        if len(tail[0]) >= CHUNK:
            self._seal()

    def extend(self, rows: Iterable[Row]) -> None:
        """Add each of ``rows`` at the end, in order."""
        for row in rows:
            self.append(row)

    def extend_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Add the rows that ``columns`` (one sequence per field, all as long) hold."""
        self._check(len(columns))
        n = len(columns[0])
        if any(len(c) != n for c in columns):
            raise ValueError(f"columns of different lengths: {[len(c) for c in columns]}")
        for column, items in zip(self._tail, columns):
            column.extend(items)
        if len(self._tail[0]) >= CHUNK:
            self._seal()

    def _seal(self) -> None:
        """Move the tail's full chunks to the chunks."""
        tail = self._tail
        full = len(tail[0]) - len(tail[0]) % CHUNK
        for i in range(0, full, CHUNK):
            self._chunks.append(tuple([tuple(column[i:i + CHUNK]) for column in tail]))
        self._in_chunks += full
        self._tail = [column[full:] for column in tail]

    def popleft(self) -> Row:
        """The oldest row, taken off the queue; ``IndexError`` when it is empty."""
        if self._next >= self._head_len:
            if self._chunks:
                self._head = self._chunks.popleft()
                self._in_chunks -= len(self._head[0])
            elif self._tail[0]:
                self._head = tuple([tuple(column) for column in self._tail])
                self._tail = [[] for _ in range(self.width)]
            else:
                raise IndexError("pop from an empty queue")
            self._head_len = len(self._head[0])
            self._next = 0
        i = self._next
        self._next = i + 1
        return tuple([column[i] for column in self._head])

    def take_all(self) -> list[Row]:
        """Every row, oldest first, taken off the queue."""
        start = self._next
        out = list(zip(*[column[start:] for column in self._head]))
        for chunk in self._chunks:
            out += zip(*chunk)
        out += zip(*self._tail)
        self._reset()
        return out

    def __len__(self) -> int:
        return self._head_len - self._next + self._in_chunks + len(self._tail[0])

    def __bool__(self) -> bool:
        return self._next < self._head_len or bool(self._chunks) or bool(self._tail[0])
