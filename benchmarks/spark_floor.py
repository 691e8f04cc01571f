"""The floor of kspark's query on Spark: the same query (sources, shuffle, one
``transformWithStateInPandas`` stage per sub-topology, the batch's output written and collected)
with the stage's processor replaced by one that does no stream processing.

``spark_vs_native.py --floor read`` runs it as an engine of its own: what is left of kspark's
time is what Spark takes to run a stateful Python stage over the micro-batches; native's time
divided by the floor's is the highest ratio any processor in that stage could reach.

- ``read``: each task reads its records (its file ranges, decoded into columns, as the stage
  reads them) and writes its task state once; nothing else.
- ``empty``: each task writes its task state once and reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

FLOORS = ("read", "empty")


def install(kind: str) -> None:
    """Make the queries this process starts from now on run the floor processor ``kind``
    (in place of :class:`kspark.spark.internals.stage.StageProcessor`, which
    ``query_frame`` looks up when it builds a query)."""
    if kind not in FLOORS:
        raise ValueError(f"floor {kind!r}: one of {FLOORS}")
    import pandas as pd

    from kspark.spark.internals import stage
    from kspark.spark.internals.stage_rows import record_columns
    from kspark.spark.internals.wire import RECORD_KINDS

    class FloorStage(stage.StageProcessor):
        """Reads its task's records (``read``) and writes the task's state; emits nothing."""

        def handleInputRows(
            self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
        ) -> Iterator[pd.DataFrame]:
            frame = pd.concat(list(rows), ignore_index=True)
            if kind == "read":
                own = frame["kind"].isin(RECORD_KINDS).to_numpy()
                record_columns(frame[own], self.file_records)
            self.meta.update((b"floor",))
            return iter(())

    # a class made here goes to the executors' Python workers by value (they cannot import
    # this benchmark's modules)
    stage.StageProcessor = FloorStage
