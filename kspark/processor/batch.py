"""What a processor can do with many records at once: the declared batch interfaces.

The runtime recognises these by type (``isinstance``), never by probing for methods:

- :class:`RecordMapper`: a stateless operator whose output for a list of records is computed
  without the processor context; straight chains of them into a sink take a list at a time.
- :class:`ColumnMapper`: a :class:`RecordMapper` that also maps records held as columns.
- :class:`BatchProcessor`: a processor that can take a whole task's batch straight from its
  source (:class:`RecordBatch`) and produce exactly what record-by-record processing would.
- :class:`SerializedBatchProcessor`: a processor that can take a whole task's batch still
  serialized (:class:`SerializedBatch`) and decode it itself, faster than the generic decoding.
- :class:`StreamTimeFollower`: a processor that acts when stream time moves without a record
  (idle closing).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from kspark.record_columns import RecordColumns
from kspark.records import Record


class RecordMapper(ABC):
    """A stateless operator that maps a list of records to what it forwards for them."""

    @abstractmethod
    def map_batch(self, records: list[Record]) -> list[Record]:
        """What the operator forwards for ``records``, in order (no processor context)."""


class ColumnMapper(RecordMapper):
    """A :class:`RecordMapper` that maps records held as columns as well."""

    @abstractmethod
    def map_columns(self, columns: RecordColumns) -> RecordColumns:
        """:meth:`map_batch` of ``columns.records()``, as columns."""


class PassThrough(ColumnMapper):
    """A stateless operator that forwards every record unchanged and runs no user code
    (``merge``, a ``split`` branch): the runtime may hand what it would receive to its
    children directly."""

    def map_batch(self, records: list[Record]) -> list[Record]:
        return records

    def map_columns(self, columns: RecordColumns) -> RecordColumns:
        return columns


class StreamTimeFollower(ABC):
    """A processor that reacts to stream time advanced without a record (idle closing)."""

    @abstractmethod
    def advance_stream_time(self, timestamp: int) -> None:
        """Stream time is now ``timestamp``: close and emit what that closes."""


class DecodedValues(Protocol):
    """A decoded key or value column of a batch."""

    codes: np.ndarray
    uniques: list[Any]
    immutable: bool

    def value(self, i: int) -> Any:
        """The value of record ``i`` (a fresh object unless immutable)."""


class RecordBatch(Protocol):
    """One task's records of a micro-batch, straight from one source, as a
    :class:`BatchProcessor` sees them: decoded keys and values, timestamps, stream time after
    each record, and ways to run records the exact way and to forward results."""

    keys: DecodedValues
    values: DecodedValues
    timestamps: np.ndarray
    #: the task's stream time after each record
    stream_times: np.ndarray

    def __len__(self) -> int: ...

    def captures_changelog(self, store: str) -> bool:
        """Whether changelog entries of ``store`` are kept."""

    def stores_of_other_nodes(self, store: str) -> bool:
        """Whether another processor of the sub-topology is connected to ``store``."""

    def process_exact(self, i: int, process: Callable[[Record], None]) -> None:
        """Run record ``i`` through ``process`` as record-by-record processing would."""

    def run_at(self, i: int, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` in the processor's context while record ``i`` is processed."""

    def forward_at(self, i: int, records: list[Record]) -> None:
        """Forward ``records`` while record ``i`` is processed."""

    def forward_each(self, positions: np.ndarray, records: list[Record]) -> None:
        """Forward each record while the record at its position is processed."""

    def forward_columns(self, positions: np.ndarray, columns: RecordColumns) -> None:
        """:meth:`forward_each` of records held as columns."""

    def forward_groups(self, positions: Sequence[int], groups: list[list[Record]]) -> None:
        """For each position, forward its group while that record is processed."""


class BatchProcessor(ABC):
    """A processor that can process a whole batch at once (see :class:`RecordBatch`)."""

    @abstractmethod
    def process_batch(self, batch: RecordBatch) -> int | None:
        """Process every record of ``batch`` exactly as ``process`` would, one after another;
        return how many it handled the vectorised way, or ``None`` (before changing anything)
        to have the batch processed record by record."""


class SerializedBatch(Protocol):
    """One task's records of a micro-batch, straight from one source, still serialized."""

    #: key bytes of each record (``None``: no key)
    keys: np.ndarray
    #: value bytes of each record (``None``: no value)
    values: np.ndarray
    timestamps: np.ndarray

    def __len__(self) -> int: ...


class SerializedBatchProcessor(BatchProcessor):
    """A :class:`BatchProcessor` that can also process a whole batch of serialized records at
    once: the runtime offers it the batch before decoding it, when it is the source's only
    child."""

    @abstractmethod
    def process_serialized(self, batch: SerializedBatch) -> int | None:
        """Process every record of ``batch`` exactly as ``process`` would, one after another;
        return how many it handled that way, or ``None`` (before changing anything) to have
        the batch decoded and processed the usual way."""
