"""``spark.readStream.format("kspark_kafka_ranges")``: the range rows of Kafka topics for the
stages to read (``kspark_kafka`` with ``kspark.read_in_stage``, same options and offsets), made
on the driver when a micro-batch's offsets are taken (a Spark simple stream reader): Spark keeps
the rows, and the read stage's task scans them without a Python worker.

Spark asks a simple stream reader for no latest offset, so each end offset carries the
partitions' end offsets when it was taken under :data:`LATEST` (``{"@latest": {topic:
{partition: offset}}}``), which :mod:`~kspark.spark.internals.progress` reads for how far the
query is behind. A replayed micro-batch (after a restart) makes its rows again in a Python
worker, as the simple reader API does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from kspark.spark.internals.kafka_source import (
    IN_STAGE_OPTION,
    KafkaStreamReader,
    decode_offsets,
    encode_offsets,
)

#: the key of an end offset holding the partitions' end offsets when it was taken
LATEST = "@latest"


class KafkaRangeSource(DataSource):
    """Kafka topics as range rows made on the driver (see the module)."""

    @classmethod
    def name(cls) -> str:
        return "kspark_kafka_ranges"

    def schema(self) -> str:
        from kspark.spark.internals.row_schema import ROW_DDL

        return ROW_DDL

    def simpleStreamReader(self, schema: Any) -> SimpleDataSourceStreamReader:
        return KafkaRangeReader(dict(self.options))


class KafkaRangeReader(SimpleDataSourceStreamReader):
    """The range rows of the offsets a micro-batch takes, with the offsets of
    :class:`~kspark.spark.internals.kafka_source.KafkaStreamReader` (at most
    ``maxOffsetsPerTrigger`` a batch)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.kafka = KafkaStreamReader({**options, IN_STAGE_OPTION: "true"})

    def initialOffset(self) -> dict:
        return self.kafka.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[Any], dict]:
        kafka = self.kafka
        offsets = {k: v for k, v in start.items() if k != LATEST}
        end = kafka.latestOffset(offsets, kafka.getDefaultReadLimit())
        if end == offsets:  # nothing new: the offset as it was, so Spark plans no batch
            return iter([]), start
        latest = kafka.reportLatestOffset()
        if latest is not None:
            end = {**end, LATEST: encode_offsets(decode_offsets(latest))}
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[Any]:
        kafka = self.kafka
        parts = kafka.partitions(start, end)
        return iter([batch for part in parts for batch in kafka.read(part)])

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint
