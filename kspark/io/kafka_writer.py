"""The executors' writer of an application's Kafka sink topics on one cluster.

Each Spark task of the query's last stage writes its partition of a micro-batch (the records of
every sink and changelog topic on the cluster) in one Kafka transaction of its own, with the
transactional id of its partition and a marker of the batch (:mod:`kspark.kafka.sink`): a task
that runs again after its partition was committed (a retried task, or a batch Spark replays after
a restart) writes nothing. The driver sees only the counters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kspark.io.location import PartitionWriter
from kspark.io.schema import sink_row_chunks
from kspark.kafka.sink import TransactionalWriter


class KafkaPartitionWriter(PartitionWriter):
    """Writes the sink topics of one application on one Kafka cluster from the executors,
    with the records' headers."""

    takes_headers = True

    def __init__(self, bootstrap_servers: str, application_id: str,
                 config: dict[str, Any]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.application_id = application_id
        self.config = dict(config)
        #: kspark topic name -> Kafka topic name, for every topic written here
        self.names: dict[str, str] = {}
        #: in an executor's task: the writer being opened since :meth:`begin`
        self._opening: ThreadPoolExecutor | None = None
        self._opened: Future[TransactionalWriter] | None = None

    def begin(self, batch_id: int, run: str, partition: int) -> None:
        """Take over the partition's transactional id and read its marker in a thread, while
        the stage computes the records: fenced first, the marker read after, as when opened
        at the write (another instance that takes the id over later fails this commit)."""
        self._opening = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kspark-sink")
        self._opened = self._opening.submit(self._open, partition)

    def _open(self, partition: int) -> TransactionalWriter:
        writer = self._writer(partition)
        try:
            writer.open()
        except BaseException:
            writer.close()
            raise
        return writer

    def _writer(self, partition: int) -> TransactionalWriter:
        return TransactionalWriter(self.bootstrap_servers, self.application_id, self.config,
                                   partition=partition)

    def end(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:  # nothing was written: a failure to open does not matter
            with contextlib.suppress(Exception):
                opened.result().close()
        if self._opening is not None:
            self._opening.shutdown(wait=False)
            self._opening = None

    def write(self, batch_id: int, run: str, partition: int, tables: Mapping[str, Any]
              ) -> dict[str, int]:
        opened, self._opened = self._opened, None
        writer = self._writer(partition) if opened is None else opened.result()
        try:
            count = writer.write(run, batch_id, {
                self.names[topic]: sink_row_chunks(table) for topic, table in tables.items()
                if table.num_rows
            })
        finally:
            writer.close()
        return {
            "sink.records.written": count,
            "sink.transactions.committed": writer.committed_batches,
            "sink.transactions.skipped": writer.skipped_batches,
        }
