"""Writing micro-batches to Kafka exactly once with Kafka transactions, without Spark.

As Kafka Streams' ``exactly_once_v2``: everything one micro-batch writes to a Kafka cluster (the
output topics' records and the stores' changelog records) is produced in one Kafka transaction,
together with a marker ``{"run", "batch"}`` in a small compacted topic of the application
(``<application id>-kspark-sink-batches``, keyed by the transactional id). Consumers reading
with ``isolation.level=read_committed`` see a batch whole or not at all.

On Spark each kspark task writes its records from its stage right after it ran, in its own
transactions (or, where the stage cannot, each partition of the query's last stage writes
them): the transactional id is stable per application and writer
(``<application id>-kspark-sink-<task>`` with a task id such as ``0_3``, or
``<application id>-kspark-sink-<partition>``; a writer of neither has
``<application id>-kspark-sink``), so a restarted or duplicate instance takes it over: its first
call (``init_transactions``) aborts whatever transaction the old one left open and fences the old
producer, whose next commit fails. The new writer then reads its last committed marker: Spark
replays a batch whose output was committed but not yet recorded in Spark's checkpoint, with the
same batch id and the same records, and a batch at or below the marker is skipped. ``run`` is
the id of the Spark query, kept in its checkpoint: a query started on a fresh checkpoint starts
a new run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kspark.errors import StreamsError
from kspark.kafka.acls import denied_error, transaction_acl
from kspark.kafka.admin import TopicError, client_config
from kspark.kafka.reader import read_to_end, unavailable

log = logging.getLogger("kspark.kafka")

#: a batch's records for one topic: ``(key, value, timestamp ms, partition, headers)`` (headers: a
#: list of ``(name, bytes or None)`` pairs, or ``None`` for none)
Rows = list[tuple[bytes | None, bytes | None, int, int, Any]]

#: errors that mean another producer took over the transactional id
_FENCED = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED")


def marker_topic(application_id: str) -> str:
    """The topic where an application's transactional writers record their last batch."""
    return f"{application_id}-kspark-sink-batches"


def transactional_id(application_id: str, partition: int | str | None = None) -> str:
    """The transactional id of an application's writer for a kspark task (its id, ``"0_3"``)
    or a Spark partition of the query's last stage (stable across restarts)."""
    base = f"{application_id}-kspark-sink"
    return base if partition is None else f"{base}-{partition}"


class TransactionalWriter:
    """Writes micro-batches to one Kafka cluster, each in one transaction and each once (see the
    module's documentation). Records of a batch are staged per topic with :meth:`stage`, then
    :meth:`commit` writes them with the batch's marker."""

    def __init__(
        self,
        bootstrap_servers: str,
        application_id: str,
        config: dict[str, Any] | None = None,
        timeout: float = 120.0,
        partition: int | str | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.application_id = application_id
        self.transactional_id = transactional_id(application_id, partition)
        self.markers = marker_topic(application_id)
        self.config = dict(config or {})
        self.timeout = timeout
        self._producer: Any = None
        #: the last committed marker: {"run", "batch"}
        self._marker: dict[str, Any] = {"run": None, "batch": -1}
        self._staged: dict[str, list[Iterable[Rows]]] = {}
        #: delivery errors of the open transaction (the first few)
        self._errors: list[str] = []
        #: the producer's fatal error, once librdkafka reported it (its calls then fail with
        #: a generic ``_FATAL``)
        self._fatal: Any = None
        self.skipped_batches = 0
        self.committed_batches = 0
        #: the batch whose transaction :meth:`send` began (committed by :meth:`commit`)
        self._sending: tuple[str, int] | None = None

    def open(self) -> None:
        """Take over the transactional id (aborting and fencing any earlier holder) and read the
        last committed marker."""
        if self._producer is not None:
            return
        self.take_over()
        self._marker = self.last_marker()
        log.debug(
            "writer %r took over; last committed batch %s of run %s",
            self.transactional_id, self._marker["batch"], self._marker["run"],
        )

    def take_over(self) -> None:
        """Initialise transactions on the transactional id: an earlier holder's open
        transaction is aborted and its producer fenced."""
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            client_config(
                self.bootstrap_servers,
                {
                    "transactional.id": self.transactional_id,
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "queue.buffering.max.messages": 1_000_000,
                    "transaction.timeout.ms": 120_000,
                    # librdkafka's connection to the transaction coordinator it has just found
                    # may otherwise wait for its next wake-up (half a second) before it is made
                    "topic.metadata.refresh.interval.ms": 50,
                    # one callback for the few records that fail, not one per record
                    "delivery.report.only.error": True,
                    "on_delivery": self._delivered,
                    **self.config,
                    "error_cb": self._on_error,
                },
            )
        )
        try:
            producer.init_transactions(self.timeout)
        except KafkaException as exc:
            if exc.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
                raise denied_error(self.bootstrap_servers, self.config,
                                   transaction_acl(transactional_id(self.application_id))
                                   ) from None
            raise StreamsError(
                f"Kafka on {self.bootstrap_servers}: cannot initialise transactions for "
                f"transactional id {self.transactional_id!r}: {exc.args[0].str()}"
            ) from exc
        self._producer = producer

    def last_marker(self) -> dict[str, Any]:
        """The last committed marker of this writer (``{"run": None, "batch": -1}`` if none),
        searched from the end of the marker topic backwards."""
        return last_marker(self.bootstrap_servers, self.markers, self.transactional_id,
                           self.config)

    def app_marker(self) -> dict[str, Any]:
        """The marker of the application's last committed batch, over all its writers."""
        found: dict[str, Any] = {"run": None, "batch": -1}
        prefix = transactional_id(self.application_id).encode()
        for m in read_to_end(self.bootstrap_servers, self.markers, self.config):
            if m.key() is not None and m.key().startswith(prefix) and m.value() is not None:
                marker = json.loads(m.value())
                if marker["batch"] >= found["batch"]:
                    found = marker
        return found

    def written(self, run: str, batch_id: int) -> bool:
        """Whether batch ``batch_id`` of query run ``run`` was committed before."""
        return self._marker["run"] == run and batch_id <= self._marker["batch"]

    def stage(self, topic: str, rows: Rows) -> None:
        """Add records to the batch being written (sent at :meth:`commit`)."""
        if rows:
            self.stage_chunks(topic, [rows])

    def stage_chunks(self, topic: str, chunks: Iterable[Rows]) -> None:
        """Add records that :meth:`commit` takes one list at a time from ``chunks`` (a large
        batch then never exists as Python objects all at once)."""
        self._staged.setdefault(topic, []).append(chunks)

    def send(self, run: str, batch_id: int, tables: Mapping[str, Iterable[Rows]]) -> int:
        """Write records of batch ``batch_id`` (topic -> lists of records) right away, in the
        batch's transaction (begun by the first send), unless the batch was committed before;
        :meth:`commit` writes the rest and commits, :meth:`abort` forgets what was sent.
        Returns the number of records written."""
        self.open()
        if self.written(run, batch_id):
            return 0
        count = 0
        try:
            if self._sending != (run, batch_id):
                if self._sending is not None:
                    raise StreamsError(f"batch {self._sending[1]} of run {self._sending[0]} "
                                       f"was sent and not committed")
                self._errors.clear()
                self._producer.begin_transaction()
                self._sending = (run, batch_id)
            for topic, chunks in tables.items():
                for rows in chunks:
                    count += self._produce(topic, rows)
        except Exception as exc:
            self._sending = None
            self._fail(exc, batch_id)
        return count

    def abort(self) -> None:
        """Abort the transaction :meth:`send` began, if any (its records are never read)."""
        sending, self._sending = self._sending, None
        if sending is not None:
            try:
                self._producer.abort_transaction(self.timeout)
            except Exception as exc:
                self._fail(exc, sending[1])

    def commit(self, run: str, batch_id: int) -> int:
        """Write the staged records and the batch's marker in one transaction (with what
        :meth:`send` wrote of it), unless the batch was committed before; returns the number
        of records written."""
        staged, self._staged = self._staged, {}
        sending = self._sending == (run, batch_id)
        if not any(staged.values()) and not sending:  # nothing to write (or committed already)
            return 0
        self.open()
        if self.written(run, batch_id):
            self.skipped_batches += 1
            log.info("batch %d of run %s was committed before; skipped", batch_id, run)
            return 0
        marker = {"run": run, "batch": batch_id}
        producer = self._producer
        self._sending = None
        if not sending:
            self._errors.clear()
        try:
            if not sending:
                producer.begin_transaction()
            count = 0
            for topic, parts in staged.items():
                for chunks in parts:
                    for rows in chunks:
                        count += self._produce(topic, rows)
            key = self.transactional_id.encode()
            self._produce(self.markers, [(key, json.dumps(marker).encode(), None, 0, None)])
            producer.commit_transaction(self.timeout)
        except Exception as exc:
            self._fail(exc, batch_id)
        self._marker = marker
        self.committed_batches += 1
        return count

    def _on_error(self, error: Any) -> None:
        """librdkafka's error callback: keeps the first fatal error, and passes every error on
        to the user's own ``error_cb``, if any."""
        if error.fatal() and self._fatal is None:
            self._fatal = error
        chained = self.config.get("error_cb")
        if chained is not None:
            chained(error)

    def _delivered(self, err: Any, msg: Any) -> None:
        """librdkafka's report of a record it could not deliver (only those are reported)."""
        if err is not None and len(self._errors) < 3:
            self._errors.append(f"topic {msg.topic()!r} partition {msg.partition()}: {err.str()}")

    def _produce(self, topic: str, rows: Rows | list[tuple[Any, Any, Any, int, Any]]) -> int:
        produce = self._producer.produce
        for key, value, ts, partition, headers in rows:
            while True:
                try:
                    if headers:
                        produce(topic, value, key, partition=partition, timestamp=ts or 0,
                                headers=headers)
                    elif ts is None:
                        produce(topic, value, key, partition=partition)
                    else:
                        produce(topic, value, key, partition=partition, timestamp=ts)
                    break
                except BufferError:
                    self._producer.poll(0.05)
        self._producer.poll(0)
        return len(rows)

    def _fail(self, exc: Exception, batch_id: int) -> None:
        """Abort the open transaction (if the producer still may) and raise a clear error."""
        from confluent_kafka import KafkaException

        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if error is not None and error.name() == "_FATAL":  # which one: librdkafka's report
            try:
                self._producer.poll(0)
            except KafkaException as fatal:
                error = fatal.args[0]
            error = self._fatal or error
        where = (f"Kafka on {self.bootstrap_servers}, transactional id "
                 f"{self.transactional_id!r}, batch {batch_id}")
        if error is not None and error.name() in _FENCED:
            self._producer = None
            raise StreamsError(
                f"{where}: another instance of application {self.application_id!r} took over "
                f"the transactional id ({error.str()}); this one stops without writing"
            ) from exc
        try:
            if error is None or error.txn_requires_abort() or not error.fatal():
                self._producer.abort_transaction(self.timeout)
        except KafkaException:
            self._producer = None
        message = error.str() if error is not None else str(exc)
        if self._errors:
            message += f" (delivery failed: {'; '.join(self._errors)})"
        raise StreamsError(f"{where}: the transaction was aborted: {message}") from exc

    def commit_marker(self, marker: dict[str, Any]) -> None:
        """Commit ``marker`` alone (a transaction of no records): the writer counts as having
        written every batch up to it."""
        self.take_over()
        try:
            self._producer.begin_transaction()
            self._produce(self.markers, [(self.transactional_id.encode(),
                                          json.dumps(marker).encode(), None, 0, None)])
            self._producer.commit_transaction(self.timeout)
        except Exception as exc:
            self._fail(exc, int(marker["batch"]))
        self._marker = marker

    def write(self, run: str, batch_id: int, tables: Mapping[str, Iterable[Rows]]) -> int:
        """Stage ``tables`` (topic -> its records, in lists taken one at a time) and commit
        them as batch ``batch_id``."""
        for topic, chunks in tables.items():
            self.stage_chunks(topic, chunks)
        return self.commit(run, batch_id)

    def close(self) -> None:
        """Release the producer (an open transaction is aborted by the broker or the next
        holder of the transactional id)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.timeout)
            producer.close()


def fence(bootstrap_servers: str, application_id: str, writers: Iterable[int | str],
          config: dict[str, Any] | None = None) -> None:
    """Take over the transactional ids of an application's ``writers`` (kspark task ids and
    Spark partitions, see :func:`transactional_id`), several at once: the transactions an
    earlier instance left open are aborted and its producers fenced, before this instance
    runs a batch."""
    from concurrent.futures import ThreadPoolExecutor

    def take_over(partition: int | str) -> None:
        writer = TransactionalWriter(bootstrap_servers, application_id, config,
                                     partition=partition)
        writer.take_over()
        writer.close()

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="kspark-fence") as pool:
        for done in [pool.submit(take_over, w) for w in writers]:
            done.result()


def inherit_markers(bootstrap_servers: str, application_id: str, tasks: Mapping[str, int],
                    config: dict[str, Any] | None = None) -> list[str]:
    """Give each task of ``tasks`` (task id -> the Spark partition that runs it) whose writer
    has no marker yet the marker of its Spark partition's writer, if that has one: a
    checkpoint of a kspark that wrote each Spark partition of a batch in one transaction (or of
    ``spark.kspark.sink.in.stage=false``) had the partition's writer write the task's records,
    so a batch Spark replays after the restart is not written again. Returns the tasks that
    inherited."""
    markers: dict[str, bytes] = {}
    for message in read_to_end(bootstrap_servers, marker_topic(application_id), config):
        if message.key() is not None and message.value() is not None:
            markers[message.key().decode()] = message.value()
    inherited = []
    for task, partition in tasks.items():
        found = markers.get(transactional_id(application_id, partition))
        if transactional_id(application_id, task) in markers or found is None:
            continue
        writer = TransactionalWriter(bootstrap_servers, application_id, config, partition=task)
        try:
            writer.commit_marker(json.loads(found))
        finally:
            writer.close()
        inherited.append(task)
    if inherited:
        log.info("writers of tasks %s took the last batch of their Spark partitions' writers",
                 ", ".join(inherited))
    return inherited


def last_marker(bootstrap_servers: str, topic: str, writer: str,
                config: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """The last committed marker of transactional id ``writer`` in marker topic ``topic``: the
    topic's last records are read first, further back only while the writer's is not among
    them (compaction keeps the topic short; a writer writes a marker with each commit). One
    read-committed consumer finds the partitions, their committed ends and the records; while
    the cluster cannot serve them (a broker restarting) a new one asks again, for up to
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _last_marker(bootstrap_servers, topic, writer, config, timeout)
        except TopicError as exc:
            if exc.__cause__ is None or not unavailable(exc.__cause__) \
                    or time.monotonic() > deadline:
                raise
            log.warning("%s; asking again", exc)
            time.sleep(0.5)


def _last_marker(bootstrap_servers: str, topic: str, writer: str,
                 config: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from kspark.kafka.reader import OffsetRange, consumer_config, read_range

    key = writer.encode()
    found: dict[str, Any] = {"run": None, "batch": -1}
    consumer = Consumer(consumer_config(bootstrap_servers, config))
    try:
        try:
            meta = consumer.list_topics(topic, timeout).topics.get(topic)
        except KafkaException as exc:
            raise TopicError(f"Kafka on {bootstrap_servers}: cannot read the metadata of topic "
                             f"{topic!r} to find the marker of writer {writer!r}: "
                             f"{exc.args[0].str()}") from exc
        if meta is None or meta.error is not None or not meta.partitions:
            raise TopicError(f"Kafka topic {topic!r} does not exist on {bootstrap_servers} "
                             f"(the marker topic of writer {writer!r})")
        for partition in sorted(meta.partitions):
            try:  # a read-committed consumer's end offset is the last stable offset
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                           timeout, cached=False)
            except KafkaException as exc:
                raise TopicError(f"Kafka topic {topic!r} partition {partition} on "
                                 f"{bootstrap_servers}: cannot read its offsets to find the "
                                 f"marker of writer {writer!r}: {exc.args[0].str()}") from exc
            end, span = high, 64
            while end > low:
                start = max(low, end - span)
                rng = OffsetRange(topic, partition, start, end)
                hits = [m for chunk in read_range(bootstrap_servers, rng, config,
                                                  consumer=consumer)
                        for m in chunk if m.key() == key]
                if hits:
                    if hits[-1].value() is not None:
                        found = json.loads(hits[-1].value())
                    break
                end, span = start, span * 4
    finally:
        consumer.close()
    return found
