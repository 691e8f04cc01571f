"""A file range's records where the first stage's tasks run: read once per Spark task
(:func:`read_file_range`) and handed out per partition (:class:`FileRangeRecords`)."""

from __future__ import annotations

from typing import Any

from kspark.spark.internals.arrow_json import json_rows
from kspark.spark.internals.file_source import FileStreamReader, _FilePartition
from kspark.spark.internals.wire import task_records


def read_file_range(blob: bytes) -> FileRangeRecords:
    """The records of the file range of a :func:`~kspark.spark.internals.file_source.
    file_range_rows` row."""
    import json

    spec = json.loads(blob)
    reader = FileStreamReader(spec["options"])
    return FileRangeRecords(*reader.read_range(
        _FilePartition(spec["path"], spec["index"], spec["lo"], spec["hi"])))


class FileRangeRecords:
    """The records of a file range, copied out per partition when a task asks for them (as
    :func:`partition_slices` gives them): a Spark task copies only the records of the tasks it
    runs, not those of every partition in the file. With ``rows`` (Parquet rows read whole as
    values, the batch's values null), a partition's values are the JSON of its rows, written
    when it is asked for: no Spark task writes the JSON of rows another one processes."""

    def __init__(self, batch: Any, rows: Any | None = None) -> None:
        self._partitions = batch.column("partition").to_numpy(zero_copy_only=False)
        self._records = task_records(batch)
        self._rows = rows
        self._taken: set[int] = set()

    def pop(self, partition: int, default: Any = None) -> Any:
        """The records of ``partition`` in order, once (``default``: none, or taken before)."""
        import numpy as np
        import pyarrow as pa

        if partition in self._taken:
            return default
        self._taken.add(partition)
        rows = np.flatnonzero(self._partitions == partition)
        if not len(rows):
            return default
        taken = pa.array(rows)
        records = self._records.take(taken)
        if self._rows is None:
            return records
        values = json_rows(self._rows.take(taken))
        assert values is not None  # the rows' types were checked when they were read
        names = records.schema.names
        return pa.RecordBatch.from_arrays(
            [values.cast(pa.binary()) if name == "value" else records.column(i)
             for i, name in enumerate(names)], names=names)
