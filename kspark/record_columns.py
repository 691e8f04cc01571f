"""Records as columns: what a vectorised operator forwards into a chain of stateless
operators and a sink, without a Python object per record (see ``Task.forward_columns``).

Each column is a sequence that builds its items only when asked for one, so any code that
needs the records themselves still gets exactly the objects the record-by-record path makes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kspark.records import Change, Record
from kspark.windows import Window, Windowed

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")


class _Column(Sequence[T]):
    """A read-only column that makes item ``i`` (:meth:`_item`) only when asked for it."""

    def _item(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._item(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._item(i)


class WindowedKeys(_Column[Windowed]):
    """``Windowed(keys[codes[i]], Window(starts[i], ends[i]))`` for each ``i``."""

    def __init__(self, keys: Sequence[Any], codes: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray) -> None:
        self.keys = keys
        self.codes = codes
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.codes)

    def _item(self, i: int) -> Windowed:
        return Windowed(self.keys[int(self.codes[i])],
                        Window(int(self.starts[i]), int(self.ends[i])))

    def __iter__(self) -> Iterator[Windowed]:
        keys = self.keys
        for c, s, e in zip(self.codes.tolist(), self.starts.tolist(), self.ends.tolist()):
            yield Windowed(keys[c], Window(s, e))


class NewValues(_Column[Change]):
    """``Change(new_values[i], None)`` for each ``i``: updates that replace nothing."""

    def __init__(self, new_values: list[Any]) -> None:
        self.new_values = new_values

    def __len__(self) -> int:
        return len(self.new_values)

    def _item(self, i: int) -> Change:
        return Change(self.new_values[i], None)

    def __iter__(self) -> Iterator[Change]:
        for value in self.new_values:
            yield Change(value, None)


class RecordColumns:
    """Timestamped records without headers, as a key, a value and a timestamp column."""

    def __init__(self, keys: Sequence[Any], values: Sequence[Any], timestamps: np.ndarray
                 ) -> None:
        if not len(keys) == len(values) == len(timestamps):
            raise ValueError("record columns of different lengths")
        self.keys = keys
        self.values = values
        self.timestamps = timestamps

    def __len__(self) -> int:
        return len(self.timestamps)

    def with_values(self, values: Sequence[Any]) -> RecordColumns:
        return RecordColumns(self.keys, values, self.timestamps)

    def records(self) -> list[Record]:
        return [Record(k, v, t) for k, v, t in zip(self.keys, self.values,
                                                   self.timestamps.tolist())]
