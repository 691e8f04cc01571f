"""Read-only source stores: a store restored from (and kept current by) another application's
changelog topic (docs/semantics.md §7, seed 004).

The changelog topic is an ordinary source of the topology whose serdes decode changelog records
into store entries (:class:`~kspark.state.internals.changelog.ChangelogCodec`); its records go to a
:class:`ChangelogRestorer`, which applies them to the store with ``store.restore`` (bypassing the
store's read-only flag, and writing no changelog of its own). Every other processor connected
to the store reads it; a write raises ``InvalidStateStoreError``.
"""

from __future__ import annotations

from typing import Any

from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.batch import RecordBatch, SerializedBatch, SerializedBatchProcessor
from kspark.records import Record
from kspark.state.internals.changelog import ChangelogCodec
from kspark.state.window import InMemoryWindowStore


def restorer_name(store: str) -> str:
    """Default name of the processor that applies a source store's changelog records."""
    return f"{store}-changelog-restorer"


def source_name(store: str) -> str:
    """Default name of the source node that reads a source store's changelog topic."""
    return f"{store}-changelog-source"


class ChangelogRestorer(Processor, SerializedBatchProcessor):
    """Applies decoded changelog records ``(store key, value or None)`` to one store: a task's
    whole batch at once when it can (a window store's from the changelog bytes as columns;
    other stores' with keys and values decoded once per distinct byte string, one
    ``store.restore`` call), else record by record."""

    def __init__(self, store_name: str, codec: ChangelogCodec) -> None:
        self.store_name = store_name
        self.codec = codec

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.store: Any = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        if record.key is None:
            meta = self.context.record_metadata()
            where = (
                f"topic {meta.topic!r} partition {meta.partition} offset {meta.offset}"
                if meta is not None
                else "no input record"
            )
            self.context.record_dropped(
                "null-key",
                f"store {self.store_name!r}: skipped changelog record without a key ({where})",
            )
            return
        self.store.restore(((record.key, record.value, record.timestamp),))

    def process_batch(self, batch: RecordBatch) -> int | None:
        keys, values = batch.keys, batch.values
        if not keys.immutable or bool((keys.codes < 0).any()):
            return None  # a record without a key is dropped and counted on the record path
        uniques, value = keys.uniques, values.value
        self.store.restore([
            (uniques[code], value(i), ts)
            for i, (code, ts) in enumerate(zip(keys.codes.tolist(), batch.timestamps.tolist()))
        ])
        return len(batch)

    def process_serialized(self, batch: SerializedBatch) -> int | None:
        if not isinstance(self.store, InMemoryWindowStore) or not self.codec.pure:
            return None
        columns = self.codec.decode_window_columns(batch.keys)
        values = None if columns is None else self.codec.decode_values(batch.values)
        if columns is None or values is None:
            return None  # decoded the usual way, which names what does not decode
        keys, starts = columns
        self.store.restore_columns(keys, starts, values, batch.timestamps.tolist())
        return len(batch)
