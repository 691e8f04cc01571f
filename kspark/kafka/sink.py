"""Writing micro-batches to a Kafka topic exactly once, without Spark.

Spark replays a micro-batch after a failure with the same batch id and the same records. The
sink therefore remembers, in Kafka itself, the last batch it wrote completely: after each batch it
writes a marker ``{"run", "batch", "ends"}`` (``ends``: the topic's end offset per partition
after the batch) to a small compacted topic (one per application, keyed by sink). A replayed
batch at or below the marker is skipped. Every record carries a header ``kspark-batch`` =
``<run>/<batch>/<sink>``: after a crash in the middle of a batch (records written, marker not),
the first write after the restart reads the topic from the marker's ``ends`` and leaves out the
records of that batch that are already there, so the replay completes the batch without writing
any record twice. ``run`` is the id of the Spark query, which persists in its checkpoint: a
query started from a fresh checkpoint starts a new run.

The producer is idempotent (no duplicates from its own retries, order kept per partition). A
delivery error raises with the broker's message, which stops the query.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

from kspark.errors import StreamsError
from kspark.kafka.admin import client_config
from kspark.kafka.reader import read_to_end

log = logging.getLogger("kspark.kafka")

HEADER = "kspark-batch"
Rows = list[tuple[bytes | None, bytes | None, int, int]]


def marker_topic(application_id: str) -> str:
    """The topic where an application's Kafka sinks record their last written batch."""
    return f"{application_id}-kspark-sink-batches"


class BatchSink:
    """Writes micro-batches of ``(key, value, timestamp ms, partition)`` records to ``topic``,
    each batch once (see the module's documentation). ``name`` identifies the sink in markers
    and headers (the topology's topic name)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        markers: str,
        name: str | None = None,
        config: dict[str, Any] | None = None,
        flush_timeout: float = 120.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.markers = markers
        self.name = name or topic
        self.config = dict(config or {})
        self.flush_timeout = flush_timeout
        self._producer: Any = None
        #: the last marker: {"run", "batch", "ends"}; None until read from Kafka
        self._marker: dict[str, Any] | None = None
        self._recovered = False
        self.skipped_batches = 0
        self.recovered_records = 0

    @property
    def producer(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer(
                client_config(
                    self.bootstrap_servers,
                    {
                        "enable.idempotence": True,
                        "linger.ms": 5,
                        "queue.buffering.max.messages": 500_000,
                        "delivery.timeout.ms": 120_000,
                        **self.config,
                    },
                )
            )
        return self._producer

    # -- markers -------------------------------------------------------------------------------
    def last_marker(self) -> dict[str, Any]:
        """The last marker of this sink in Kafka (``{"run": None, "batch": -1, "ends": {}}``
        if it never wrote one)."""
        found: dict[str, Any] = {"run": None, "batch": -1, "ends": {}}
        key = self.name.encode()
        for m in read_to_end(self.bootstrap_servers, self.markers, self.config):
            if m.key() == key and m.value() is not None:
                found = json.loads(m.value())
        return found

    def _write_marker(self, marker: dict[str, Any]) -> None:
        self._produce_all(
            self.markers, [(self.name.encode(), json.dumps(marker).encode(), None, 0, None)]
        )
        self._marker = marker

    def _end_offsets(self) -> dict[str, int]:
        from kspark.kafka.reader import OffsetLookup

        lookup = OffsetLookup(self.bootstrap_servers, self.config)
        try:
            tps = lookup.topic_partitions([self.topic])
            return {str(p): o for (_, p), o in lookup.latest(tps).items()}
        finally:
            lookup.close()

    # -- writing -------------------------------------------------------------------------------
    def write(self, run: str, batch_id: int, records: Rows) -> int:
        """Write batch ``batch_id`` of query run ``run`` unless it was written before; returns
        the number of records written now."""
        if self._marker is None:
            self._marker = self.last_marker()
        marker = self._marker
        if marker["run"] == run and batch_id <= marker["batch"]:
            self.skipped_batches += 1
            log.info(
                "sink %r: batch %d of run %s was written before; skipped", self.topic, batch_id, run
            )
            return 0
        if marker["run"] != run:  # a new run: mark where it starts (nothing to recover)
            marker = {"run": run, "batch": -1, "ends": self._end_offsets()}
            self._write_marker(marker)
            self._recovered = True
        tag = f"{run}/{batch_id}/{self.name}".encode()
        if not self._recovered:
            self._recovered = True
            records = self._missing(records, marker["ends"], tag)
        ends = dict(marker["ends"])
        delivered = self._produce_all(
            self.topic, [(k, v, ts, part, [(HEADER, tag)]) for k, v, ts, part in records]
        )
        for partition, offset in delivered.items():
            ends[str(partition)] = max(ends.get(str(partition), 0), offset + 1)
        self._write_marker({"run": run, "batch": batch_id, "ends": ends})
        return len(records)

    def _missing(self, records: Rows, ends: dict[str, int], tag: bytes) -> Rows:
        """``records`` less those already on the topic with header ``tag`` (written by an attempt
        at this batch that did not finish)."""
        there: Counter[tuple[Any, ...]] = Counter()
        start = {int(p): o for p, o in ends.items()}
        for m in read_to_end(self.bootstrap_servers, self.topic, self.config, start):
            if (HEADER, tag) in (m.headers() or []):
                there[(m.key(), m.value(), m.timestamp()[1], m.partition())] += 1
        if not there:
            return records
        out = []
        for record in records:
            if there[record] > 0:
                there[record] -= 1
                self.recovered_records += 1
            else:
                out.append(record)
        log.warning(
            "sink %r: %d records of an interrupted attempt at this batch were already "
            "written; writing the other %d",
            self.topic,
            self.recovered_records,
            len(out),
        )
        return out

    def _produce_all(
        self, topic: str, rows: list[tuple[Any, Any, int | None, int, Any]]
    ) -> dict[int, int]:
        """Produce ``(key, value, timestamp, partition, headers)`` rows and wait until all are
        acknowledged: the last offset per partition, or an error with the broker's message."""
        producer = self.producer
        errors: list[tuple[int, str]] = []
        last: dict[int, int] = {}

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append((msg.partition(), err.str()))
            else:
                last[msg.partition()] = max(last.get(msg.partition(), -1), msg.offset())

        for key, value, ts, partition, headers in rows:
            kwargs: dict[str, Any] = {"partition": partition, "on_delivery": delivered}
            if ts is not None:
                kwargs["timestamp"] = ts
            if headers:
                kwargs["headers"] = headers
            while True:
                try:
                    producer.produce(topic, value, key, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
                except Exception as exc:
                    raise StreamsError(
                        f"Kafka sink topic {topic!r} partition {partition}: cannot produce a "
                        f"record: {exc}"
                    ) from exc
            producer.poll(0)
        remaining = producer.flush(self.flush_timeout)
        if errors:
            partition, message = errors[0]
            raise StreamsError(
                f"Kafka sink topic {topic!r} partition {partition}: delivery failed: {message}"
                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
            )
        if remaining:
            raise StreamsError(
                f"Kafka sink topic {topic!r}: {remaining} records not acknowledged within "
                f"{self.flush_timeout} s"
            )
        return last

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.flush_timeout)
            close = getattr(producer, "close", None)  # confluent-kafka >= 2.12
            if close is not None:
                close()
