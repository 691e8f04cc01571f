"""The ``foreachBatch`` function of an app's query: writes each micro-batch's output rows
(:mod:`~kspark.spark.internals.batch_output`) and hands the batch's figures on.

On a classic session it runs in the app's own process and reports to the app object. Over
Spark Connect the server runs it in a Python process of its own, from a pickled copy: it then
reads its query's id from the checkpoint and leaves each batch's figures as a file in the checkpoint
directory, which the app object reads (:func:`read_figures`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from kspark.errors import StreamsError
from kspark.io.location import TopicLocation
from kspark.runtime.metrics import Metrics

#: what a classic session's writer calls with each batch's figures and duration in ms
Report = Callable[[dict[str, Metrics], float], None]
#: the checkpoint directory's folder of the figures a Connect server's writer leaves
FIGURES_DIR = "figures"


def with_partition_writers(frame: Any, sinks: dict[str, TopicLocation],
                           batch_id: int | None = None, run: str | None = None) -> Any:
    """``frame`` of output rows with its sinks' partition writers applied in its last stage's
    tasks (a ``mapInArrow`` of :func:`~kspark.spark.internals.batch_output.write_in_tasks`), if
    it has any: the app's streaming frame, whose tasks know their micro-batch, or, over Spark
    Connect (where ``foreachBatch`` runs a batch's job from a request of its own, without the
    micro-batch's properties), each batch's frame with its ``batch_id`` and ``run``."""
    from kspark.spark.internals.batch_output import partition_writers, write_in_tasks
    from kspark.spark.internals.row_schema import ROW_DDL

    writers = partition_writers(sinks)
    if not writers:
        return frame
    return frame.mapInArrow(write_in_tasks(writers, batch_id, run), ROW_DDL)


class BatchWriter:
    """Writes the micro-batches of the query named ``query_name`` to ``sinks``."""

    def __init__(self, sinks: dict[str, TopicLocation], query_name: str, checkpoint_dir: str,
                 report: Report | None = None,
                 run_id: Callable[[], str] | None = None, writes_in_query: bool = True) -> None:
        self.sinks = sinks
        #: whether the query's frame writes the partition writers' sinks (else each batch's)
        self.writes_in_query = writes_in_query
        self.query_name = query_name
        self.figures_dir = os.path.join(checkpoint_dir, FIGURES_DIR)
        self.metadata = os.path.join(checkpoint_dir, "query", "metadata")
        self.report = report
        self.run_id = run_id

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a Connect server: without the app object's callbacks."""
        return {**vars(self), "report": None, "run_id": None}

    def __call__(self, frame: Any, batch_id: int) -> None:
        from kspark.spark.internals.batch_output import partition_writers, write_batch

        run = self.run_id() if self.run_id is not None else self._query_id()
        # the executors write these sinks (``with_partition_writers``); the driver gets the rest
        writers = partition_writers(self.sinks)
        if not self.writes_in_query:
            frame = with_partition_writers(frame, self.sinks, batch_id, run)
        began = time.monotonic()
        figures = write_batch(frame.toArrow(), batch_id, self.sinks, writers, run)
        took_ms = (time.monotonic() - began) * 1000
        if self.report is not None:
            self.report(figures, took_ms)
        else:
            _save_figures(self.figures_dir, batch_id, figures, took_ms)

    def _query_id(self) -> str:
        """The query's id from its checkpoint's metadata (kept across restarts)."""
        try:
            with open(self.metadata, encoding="utf-8") as f:
                return str(json.loads(f.readline())["id"])
        except (OSError, ValueError, KeyError) as exc:
            raise StreamsError(f"query {self.query_name!r}: no id in {self.metadata} (over "
                               f"Spark Connect the checkpoint must be on a local path the "
                               f"server's Python can read): {exc}") from exc


def _save_figures(directory: str, batch_id: int, figures: dict[str, Metrics],
                  took_ms: float) -> None:
    os.makedirs(directory, exist_ok=True)
    text = json.dumps({"took_ms": took_ms,
                       "figures": {task: json.loads(m.to_json()) for task, m in figures.items()}})
    tmp = os.path.join(directory, f".{batch_id}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(directory, f"{batch_id}.json"))


def read_figures(checkpoint_dir: str) -> list[tuple[dict[str, Metrics], float]]:
    """The figures of the batches a Connect server's writer left since the last call, in batch
    order (each file is removed once read)."""
    directory = os.path.join(checkpoint_dir, FIGURES_DIR)
    if not os.path.isdir(directory):
        return []
    out = []
    for name in sorted((n for n in os.listdir(directory) if n.endswith(".json")),
                       key=lambda n: int(n.split(".")[0])):
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        os.unlink(path)
        out.append(({task: Metrics.from_json(json.dumps(m).encode())
                     for task, m in saved["figures"].items()}, float(saved["took_ms"])))
    return out
