"""The executors' writer of an application's Kafka sink topics on one cluster.

Each kspark task writes its part of a micro-batch (the records of every sink and changelog
topic on the cluster) from its stage, right after it ran, in one Kafka transaction of its own,
with the transactional id of the task and a marker of the batch (:mod:`kspark.kafka.sink`);
where the stages cannot (over Spark Connect), each Spark task of the query's last stage writes
its partition of the batch so, with the transactional id of its partition. A task that runs
again after its part was committed (a retried task, or a batch Spark replays after a restart)
writes nothing. The driver sees only the counters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kspark.io.location import PartitionWriter, TaskWriter
from kspark.io.schema import sink_row_chunks
from kspark.kafka.sink import Rows, TransactionalWriter, fence, inherit_markers


class KafkaPartitionWriter(PartitionWriter, TaskWriter):
    """Writes the sink topics of one application on one Kafka cluster from the executors,
    with the records' headers: a kspark task's from its stage, or a Spark partition's."""

    takes_headers = True

    def __init__(self, bootstrap_servers: str, application_id: str,
                 config: dict[str, Any]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.application_id = application_id
        self.config = dict(config)
        #: kspark topic name -> Kafka topic name, for every topic written here
        self.names: dict[str, str] = {}
        #: in an executor: the writers being opened (by partition or task), since
        #: :meth:`begin` or :meth:`open_task`, and the threads opening them
        self._opened: dict[int | str, Future[TransactionalWriter]] = {}
        self._opening: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled to the executors without what a task opened."""
        return {**vars(self), "_opened": {}, "_opening": None}

    def begin(self, batch_id: int, run: str, partition: int) -> None:
        """Take over the partition's transactional id and read its marker in a thread, while
        the stage computes the records: fenced first, the marker read after, as when opened
        at the write (another instance that takes the id over later fails this commit)."""
        self._start(partition)

    def take_over(self, tasks: Mapping[str, int]) -> None:
        fence(self.bootstrap_servers, self.application_id, list(tasks), self.config)
        inherit_markers(self.bootstrap_servers, self.application_id, tasks, self.config)

    def open_task(self, batch_id: int, run: str, task: str) -> None:
        """As :meth:`begin`, for the transactional id of kspark task ``task`` (once)."""
        if task not in self._opened:
            self._start(task)

    def _start(self, partition: int | str) -> None:
        if self._opening is None:
            self._opening = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kspark-sink")
        self._opened[partition] = self._opening.submit(self._open, partition)

    def _open(self, partition: int | str) -> TransactionalWriter:
        writer = self._writer(partition)
        try:
            writer.open()
        except BaseException:
            writer.close()
            raise
        return writer

    def _writer(self, partition: int | str) -> TransactionalWriter:
        return TransactionalWriter(self.bootstrap_servers, self.application_id, self.config,
                                   partition=partition)

    def end(self) -> None:
        """Close every writer opened and not written with, once open (without waiting)."""
        opened, self._opened = self._opened, {}
        for future in opened.values():
            future.add_done_callback(_close_opened)
        if self._opening is not None:
            self._opening.shutdown(wait=False)
            self._opening = None

    def close_task(self, task: str) -> None:
        future = self._opened.pop(task, None)
        if future is not None:
            future.add_done_callback(_close_opened)

    def close_tasks(self) -> None:
        self.end()

    def write(self, batch_id: int, run: str, partition: int, tables: Mapping[str, Any]
              ) -> dict[str, int]:
        return self._write(batch_id, run, partition, {
            self.names[topic]: sink_row_chunks(table) for topic, table in tables.items()
            if table.num_rows
        })

    def write_task(self, batch_id: int, run: str, task: str,
                   rows: Mapping[str, Iterable[Rows]], final: bool = True) -> dict[str, int]:
        named = {self.names[topic]: chunks for topic, chunks in rows.items()}
        if final:
            return self._write(batch_id, run, task, named)
        opened = self._opened.get(task)
        if opened is None:
            opened = self._opened[task] = self._done(self._writer(task))
        return {"sink.records.written": opened.result().send(run, batch_id, named)}

    def abort_task(self, task: str) -> None:
        opened = self._opened.get(task)
        if opened is not None:
            opened.result().abort()

    @staticmethod
    def _done(writer: TransactionalWriter) -> Future[TransactionalWriter]:
        """``writer``, opened here, as :meth:`open_task` would have it."""
        future: Future[TransactionalWriter] = Future()
        try:
            writer.open()
        except BaseException:
            writer.close()
            raise
        future.set_result(writer)
        return future

    def _write(self, batch_id: int, run: str, partition: int | str,
               chunks: Mapping[str, Any]) -> dict[str, int]:
        opened = self._opened.pop(partition, None)
        writer = self._writer(partition) if opened is None else opened.result()
        try:
            count = writer.write(run, batch_id, chunks)
        finally:
            writer.close()
        return {
            "sink.records.written": count,
            "sink.transactions.committed": writer.committed_batches,
            "sink.transactions.skipped": writer.skipped_batches,
        }


def _close_opened(opened: Future[TransactionalWriter]) -> None:
    """Close a writer opened for nothing (a failure to open it does not matter)."""
    with contextlib.suppress(Exception):
        opened.result().close()
