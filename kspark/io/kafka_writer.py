"""The executors' writer of an application's Kafka sink topics on one cluster.

Each Spark task of the query's last stage writes its partition of a micro-batch (the records of
every sink and changelog topic on the cluster) in one Kafka transaction of its own, with the
transactional id of its partition and a marker of the batch (:mod:`kspark.kafka.sink`): a task
that runs again after its partition was committed (a retried task, or a batch Spark replays after
a restart) writes nothing. The driver sees only the counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kspark.io.location import PartitionWriter
from kspark.io.schema import sink_rows
from kspark.kafka.sink import TransactionalWriter


class KafkaPartitionWriter(PartitionWriter):
    """Writes the sink topics of one application on one Kafka cluster from the executors."""

    def __init__(self, bootstrap_servers: str, application_id: str,
                 config: dict[str, Any]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.application_id = application_id
        self.config = dict(config)
        #: kspark topic name -> Kafka topic name, for every topic written here
        self.names: dict[str, str] = {}

    def write(self, batch_id: int, run: str, partition: int, tables: Mapping[str, Any]
              ) -> dict[str, int]:
        writer = TransactionalWriter(self.bootstrap_servers, self.application_id, self.config,
                                     partition=partition)
        try:
            count = writer.write(run, batch_id, {
                self.names[topic]: sink_rows(table) for topic, table in tables.items()
            })
        finally:
            writer.close()
        return {
            "sink.records.written": count,
            "sink.transactions.committed": writer.committed_batches,
            "sink.transactions.skipped": writer.skipped_batches,
        }
