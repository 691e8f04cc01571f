"""A store's changelog entries written by a task since they were last taken: three columns
(keys, values, timestamps), in order, with no object per entry."""

from __future__ import annotations

from typing import Any


class ChangelogEntries:
    """``(key, value, timestamp)`` changelog entries of one store, in the order they were
    written, kept as columns (a ``None`` value deletes the key)."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.timestamps: list[int] = []

    def append(self, key: Any, value: Any, timestamp: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(timestamp)

    def extend(self, other: ChangelogEntries) -> None:
        """Append ``other``'s entries."""
        self.keys.extend(other.keys)
        self.values.extend(other.values)
        self.timestamps.extend(other.timestamps)

    def rows(self) -> list[tuple[Any, Any, int]]:
        """The entries as ``(key, value, timestamp)`` tuples."""
        return list(zip(self.keys, self.values, self.timestamps))

    def __len__(self) -> int:
        return len(self.timestamps)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangelogEntries):
            return NotImplemented
        return (self.keys == other.keys and self.values == other.values
                and self.timestamps == other.timestamps)

    def __repr__(self) -> str:
        return f"ChangelogEntries({self.rows()!r})"
