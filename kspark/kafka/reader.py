"""Reading Kafka partitions by offset range, without Spark: offsets, data-loss checks, ranges.

Offsets are planned per topic-partition: a range ``[start, end)`` is read with a consumer that
is assigned (not subscribed), so no consumer group is involved and offsets live wherever the
caller keeps them (Spark's checkpoint, for the Spark source). Reads are ``read_committed``: the
end of a partition is its last stable offset, so records of open or aborted transactions are
never read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from kspark.kafka.admin import (
    AuthenticationWatch,
    KafkaUnreachableError,
    TopicError,
    client_config,
    matching_topics,
    partition_counts,
)

log = logging.getLogger("kspark.kafka")
T = TypeVar("T")

#: seconds without a record after which a range's reader starts a new consumer
RENEW_AFTER_S = 10.0
#: in per-partition starting offsets: the earliest / the latest offset (as in Spark and Kafka)
EARLIEST = -2
LATEST = -1

TP = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


#: the consumer group of kspark's assign-only consumers (they commit nothing to it)
READER_GROUP = "kspark-reader"


def consumer_config(bootstrap_servers: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Settings of kspark's assign-only consumers (read committed, no offset commits, partition
    ends reported, no silent offset reset)."""
    return client_config(
        bootstrap_servers,
        {
            "group.id": READER_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "isolation.level": "read_committed",
            # ranges are bounded: answer at the end of a partition at once, not after 500 ms
            "fetch.wait.max.ms": 10,
            # a range is read faster than librdkafka's default queue back-off (1 s once
            # 100 k messages are queued) lets its fetches follow: see docs/performance.md
            "fetch.queue.backoff.ms": 50,
            **(extra or {}),
        },
    )


def plan_start(tp: TP, start: int, low: int, high: int, fail_on_data_loss: bool) -> tuple[int, int]:
    """Where to resume ``tp`` whose next offset to read is ``start`` while the partition now
    holds ``[low, high)``: returns ``(offset, offsets skipped)``. Records deleted before they
    were read (``start < low``) or a partition that went back (``start > high``: the topic was
    re-created or truncated) are data loss: an error, or with ``fail_on_data_loss=False``
    skipped and counted."""
    if low <= start <= high:
        return start, 0
    where = f"Kafka topic {tp[0]!r} partition {tp[1]}"
    if start < low:
        report_data_loss(
            where,
            f"offsets {start} to {low - 1} were deleted before they were read (the "
            f"partition now starts at offset {low})",
            fail_on_data_loss,
        )
        return low, low - start
    report_data_loss(
        where,
        f"the next offset to read is {start} but the partition ends at offset {high} "
        "(was the topic deleted and re-created?)",
        fail_on_data_loss,
    )
    return low, 0


def limit_ranges(available: dict[TP, tuple[int, int]], max_records: int) -> dict[TP, int]:
    """End offsets that take exactly ``min(max_records, all available)`` offsets from the
    ``(start, end)`` ranges, shared in proportion to what each partition has (largest
    remainders first), so that a trigger with data always makes progress."""
    sizes = {tp: max(0, end - start) for tp, (start, end) in available.items()}
    total = sum(sizes.values())
    if total <= max_records:
        return {tp: end for tp, (_, end) in available.items()}
    shares = {tp: size * max_records // total for tp, size in sizes.items()}
    left = max_records - sum(shares.values())
    for tp in sorted(sizes, key=lambda tp: sizes[tp] * max_records % total, reverse=True):
        if left <= 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: available[tp][0] + shares[tp] for tp in available}


class OffsetLookup:
    """Partitions and offsets of topics, for planning. Keeps its clients between calls."""

    def __init__(
        self, bootstrap_servers: str, config: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.config = dict(config or {})
        self.timeout = timeout
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(client_config(self.bootstrap_servers, self.config))
        return self._admin

    def topic_partitions(
        self, topics: list[str] | None = None, pattern: str | None = None
    ) -> list[TP]:
        """Every partition of the named topics (a missing one is an error naming it) or of the
        topics matching ``pattern``."""
        if pattern is not None:
            counts = matching_topics(self.bootstrap_servers, pattern, self.config)
        else:
            found = partition_counts(self.bootstrap_servers, list(topics or []), self.config)
            missing = [t for t, n in found.items() if n is None]
            if missing:
                raise TopicError(
                    f"Kafka topic {missing[0]!r} does not exist on {self.bootstrap_servers}"
                    + (f" (nor {missing[1:]})" if len(missing) > 1 else "")
                )
            counts = {t: int(n or 0) for t, n in found.items()}
        return [(t, p) for t in sorted(counts) for p in range(counts[t])]

    def list_offsets(self, tps: list[TP], spec: Any, committed: bool = True) -> dict[TP, int]:
        """Offsets of ``tps`` by ``spec``, for read-committed readers unless ``committed`` is
        false (then the latest offset is the log's end, open transactions included)."""
        from confluent_kafka import IsolationLevel, TopicPartition

        if not tps:
            return {}
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in tps},
            isolation_level=(IsolationLevel.READ_COMMITTED if committed
                             else IsolationLevel.READ_UNCOMMITTED),
            request_timeout=self.timeout,
        )
        out = {}
        for tp, future in futures.items():
            try:
                offset = int(future.result().offset)
            except Exception as exc:
                where = (f"Kafka topic {tp.topic!r} partition {tp.partition} on "
                         f"{self.bootstrap_servers}")
                if _unavailable(exc):  # a cluster starting or electing leaders: try again
                    raise KafkaUnreachableError(
                        f"Kafka at {self.bootstrap_servers} cannot serve offsets of {where} "
                        f"yet: {exc}") from None
                raise TopicError(f"cannot list offsets of {where}: {exc}") from exc
            if offset < 0:  # no offset (-1001) from a broker that has just come back
                raise KafkaUnreachableError(
                    f"Kafka at {self.bootstrap_servers} cannot serve offsets of Kafka topic "
                    f"{tp.topic!r} partition {tp.partition} yet: it answered offset {offset}")
            out[(tp.topic, tp.partition)] = offset
        return out

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        from confluent_kafka.admin import OffsetSpec

        return self.list_offsets(tps, OffsetSpec.earliest())

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        """The end offset of each partition for read-committed readers (its last stable
        offset: no open transaction's record lies before it)."""
        from confluent_kafka.admin import OffsetSpec

        return self.list_offsets(tps, OffsetSpec.latest())

    def when_served(self, ask: Callable[[], T]) -> T:
        """``ask()``, asked again every half second while the cluster cannot serve it yet (a
        partition without a leader right after its topic's creation), for up to
        :attr:`timeout` seconds."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return ask()
            except KafkaUnreachableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def close(self) -> None:
        self._admin = None


def read_range(
    bootstrap_servers: str,
    rng: OffsetRange,
    config: dict[str, Any] | None = None,
    fail_on_data_loss: bool = True,
    batch_size: int = 10_000,
    stall_timeout: float = 60.0,
    consumer: Any | None = None,
) -> Iterator[list[Any]]:
    """Messages of ``rng`` (confluent-kafka ``Message`` objects, offsets in ``[start, end)``),
    in offset order, in lists of at most ``batch_size``. ``consumer``: a consumer of
    :func:`consumer_config`'s settings to read with (assigned to the range, left open), instead
    of a new one."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if rng.end <= rng.start:
        return
    where = f"Kafka topic {rng.topic!r} partition {rng.partition}"
    settings = consumer_config(bootstrap_servers, config)
    watch = AuthenticationWatch(bootstrap_servers, settings.get("error_cb"))
    borrowed: Any = consumer
    if consumer is None:
        consumer = Consumer(watch.watching(settings))
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        last_progress = renewed = time.monotonic()
        while position < rng.end:
            out = []
            for m in _poll(consumer, batch_size, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() < rng.end:  # the partition went back since planning
                            report_data_loss(
                                where,
                                f"it now ends at offset {m.offset()}, before the "
                                f"planned end {rng.end}",
                                fail_on_data_loss,
                            )
                        position = rng.end  # (past control or aborted records at the end)
                        break
                    if err.code() in (
                        KafkaError._AUTO_OFFSET_RESET,
                        KafkaError.OFFSET_OUT_OF_RANGE,
                    ):
                        report_data_loss(
                            where,
                            f"offset {position} is out of range (records deleted "
                            "before they were read)",
                            fail_on_data_loss,
                        )
                        consumer.assign([TopicPartition(rng.topic, rng.partition, EARLIEST)])
                        continue
                    if err.fatal() or not err.retriable():
                        raise TopicError(f"{where}: reading at offset {position} failed: {err}")
                    continue
                offset = m.offset()
                if offset >= rng.end:
                    position = rng.end
                    break
                out.append(m)
                position = offset + 1
            if out:
                last_progress = time.monotonic()
                watch.reason = None
                yield out
                continue
            if position < rng.end:
                watch.check()  # a refused login: at once, not after the stall timeout
            if time.monotonic() - max(last_progress, renewed) > RENEW_AFTER_S:
                # a client that lost its broker (restarted, moved) can stay stuck: a new one
                if consumer is not borrowed:
                    consumer.close()
                consumer = Consumer(watch.watching(settings))
                consumer.assign([TopicPartition(rng.topic, rng.partition, position)])
                renewed = time.monotonic()
            if time.monotonic() - last_progress > stall_timeout:
                raise TopicError(
                    f"{where}: no record at or after offset {position} within {stall_timeout} s "
                    f"although offsets up to {rng.end - 1} were planned (was the partition "
                    "truncated or the topic deleted?)"
                )
    finally:
        if consumer is borrowed:
            borrowed.unassign()
        else:
            consumer.close()


def _poll(consumer: Any, n: int, timeout: float) -> list[Any]:
    """Up to ``n`` messages or events: waits up to ``timeout`` for the first only (``consume``
    alone would wait the whole timeout unless ``n`` are ready)."""
    first = consumer.poll(timeout)
    return [] if first is None else [first, *consumer.consume(n - 1, 0)]


def report_data_loss(where: str, problem: str, fail_on_data_loss: bool) -> None:
    """Raise :class:`TopicError` for lost records, or log them when they may be skipped."""
    if fail_on_data_loss:
        raise TopicError(
            f"{where}: {problem}; records may have been lost. Set "
            "fail_on_data_loss=False to skip them and go on"
        )
    log.warning("%s: %s; skipping (fail_on_data_loss=False)", where, problem)


def wait_settled(bootstrap_servers: str, topics: list[str],
                 config: dict[str, Any] | None = None, timeout: float = 30.0) -> bool:
    """Wait until no transaction is open on any partition of ``topics`` (each partition's
    read-committed end has reached its log end): a producer's commit returns before the
    transaction's markers are written, so a read right after it may end before its records.
    For reading a stopped application's output; returns whether it settled in ``timeout``."""
    from confluent_kafka.admin import OffsetSpec

    lookup = OffsetLookup(bootstrap_servers, config)
    try:
        tps = lookup.topic_partitions(topics)
        deadline = time.monotonic() + timeout
        while True:
            stable = lookup.list_offsets(tps, OffsetSpec.latest())
            if stable == lookup.list_offsets(tps, OffsetSpec.latest(), committed=False):
                return True
            if time.monotonic() > deadline:
                log.warning("Kafka topics %s: a transaction is still open after %.0f s",
                            topics, timeout)
                return False
            time.sleep(0.05)
    finally:
        lookup.close()


def read_to_end(
    bootstrap_servers: str,
    topic: str,
    config: dict[str, Any] | None = None,
    start: dict[int, int] | None = None,
) -> Iterator[Any]:
    """Every message of ``topic`` from ``start`` (partition -> offset; default earliest) to the
    current end, partition by partition (for tools, tests and recovery)."""
    lookup = OffsetLookup(bootstrap_servers, config)
    try:
        tps = lookup.topic_partitions([topic])
        low = lookup.when_served(lambda: lookup.earliest(tps))
        high = lookup.when_served(lambda: lookup.latest(tps))
    finally:
        lookup.close()
    for tp in tps:
        first = max(low[tp], (start or {}).get(tp[1], low[tp]))
        for chunk in read_range(bootstrap_servers, OffsetRange(*tp, first, high[tp]), config):
            yield from chunk


#: error codes of a partition whose leader is not (yet) known or has moved: the cluster is
#: starting, or a topic was just created (error 6 under its librdkafka name and Kafka's)
_UNAVAILABLE = frozenset(("_NOENT", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION",
                          "NOT_LEADER_OR_FOLLOWER",
                          "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "_TRANSPORT",
                          "_ALL_BROKERS_DOWN", "_TIMED_OUT", "COORDINATOR_LOAD_IN_PROGRESS",
                          "_DESTROY_BROKER"))


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (a ``KafkaException``) says the cluster cannot serve a request for now:
    a broker down or restarting, a partition without a known leader yet."""
    return isinstance(exc, Exception) and _unavailable(exc)


def _unavailable(exc: Exception) -> bool:
    """Whether a Kafka error says the cluster cannot serve the request for now (retriable, or
    a partition without a known leader yet)."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and (error.retriable() or error.name() in _UNAVAILABLE)
