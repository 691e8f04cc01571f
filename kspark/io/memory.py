"""In-memory topics for tests and notebooks.

As a source, a memory topic keeps what you ``send`` in files of its own temporary directory (the
Spark source reads them like any file topic; each ``flush`` is one file, and with
``max_files_per_trigger=1`` one micro-batch). As a sink it collects each micro-batch's records in
the driver's memory, keyed by batch id, so a replayed batch replaces itself (written once).
"""

from __future__ import annotations

import tempfile
from typing import Any

from kspark.hashing import kafka_partition
from kspark.io.files import FileTopic
from kspark.io.schema import SINK_SCHEMA, sink_rows
from kspark.serdes import Json, Serde, as_serde


class MemoryTopic(FileTopic):
    """A topic held in memory (source: temporary files; sink: driver memory)."""

    not_over_connect = "a memory sink keeps its records in the process that writes them"

    def __init__(
        self,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        partitions: int = 1,
        max_files_per_trigger: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(
            path or tempfile.mkdtemp(prefix="kspark-memory-"),
            format="kspark",
            partitions=partitions,
            max_files_per_trigger=max_files_per_trigger,
        )
        self.key_serde = as_serde(key_serde) if key_serde is not None else Json()
        self.value_serde = as_serde(value_serde) if value_serde is not None else Json()
        self._pending: list[tuple[bytes | None, bytes | None, int, int]] = []
        self._files = 0
        self.batches: dict[int, list[tuple[bytes | None, bytes | None, int, int]]] = {}

    # -- source --------------------------------------------------------------------------------
    def send(self, key: Any, value: Any, timestamp: int, partition: int | None = None) -> None:
        """Queue one record (serialized with the topic's serdes) until :meth:`flush`."""
        k = self.key_serde.serialize(key)
        v = self.value_serde.serialize(value)
        if partition is None:
            partition = (
                0 if k is None or self.partitions == 1 else kafka_partition(k, self.partitions)
            )
        self._pending.append((k, v, int(timestamp), int(partition)))

    def send_all(self, records: list[tuple[Any, Any, int]], per_file: int | None = None) -> None:
        """Send ``(key, value, timestamp)`` records, flushing every ``per_file`` records."""
        for i, (k, v, ts) in enumerate(records, 1):
            self.send(k, v, ts)
            if per_file and i % per_file == 0:
                self.flush()
        self.flush()

    def flush(self) -> None:
        """Make the queued records visible to the source as one new file, at once under its
        final name (a source polling meanwhile sees it whole or not at all)."""
        if not self._pending:
            return
        import pyarrow as pa

        columns = [list(c) for c in zip(*self._pending)]
        self.write_file(self.path, f"in-{self._files:012d}", pa.table(columns, schema=SINK_SCHEMA))
        self._files += 1
        self._pending = []

    # -- sink ----------------------------------------------------------------------------------
    def partition_writer(self) -> None:
        """None: the driver keeps the records (:meth:`write_table`)."""
        return None

    def write_table(self, batch_id: int, table: Any) -> None:
        self.batches[batch_id] = sink_rows(table)

    def raw_records(self) -> list[tuple[bytes | None, bytes | None, int, int]]:
        return [r for b in sorted(self.batches) for r in self.batches[b]]

    def records(self) -> list[tuple[Any, Any, int]]:
        """Everything written here, deserialized: ``(key, value, timestamp)`` in order."""
        return [
            (self.key_serde.deserialize(k), self.value_serde.deserialize(v), ts)
            for k, v, ts, _ in self.raw_records()
        ]
