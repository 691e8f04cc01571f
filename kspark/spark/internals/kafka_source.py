"""``spark.readStream.format("kspark_kafka")``: Kafka topics as a Spark stream, on confluent-kafka.

The columns are those of Spark's native Kafka source: key, value, topic, partition, offset,
timestamp, timestampType and headers. Options (named as the native source's):

- ``kafka.bootstrap.servers`` (required); any other ``kafka.*`` option goes to librdkafka;
- ``subscribe`` (comma-separated topic names) or ``subscribePattern`` (a regular expression);
- ``startingOffsets``: ``earliest`` (default), ``latest``, or JSON per partition
  (``{"clicks": {"0": 42, "1": -2}}``, -2 earliest, -1 latest; partitions left out start at the
  earliest). Only a new query uses it: a restart resumes from its checkpoint;
- ``maxOffsetsPerTrigger``: at most this many offsets per micro-batch, shared between partitions
  in proportion to what each has;
- ``failOnDataLoss`` (default true): stop with an error naming the topic, partition and offsets
  when records were deleted before they were read or a partition went back; with false skip them
  and count them in the offsets under ``"@skipped"`` (see :func:`skipped_offsets`).

Offsets (kept in Spark's checkpoint) are ``{"topic": {"partition": next offset}}``.

With the option ``kspark.read_in_stage`` (set by kspark for its own queries) the source reads no
record: it gives one *range row* per partition range of the micro-batch (kspark's row layout,
topic named by ``kspark.topic``), and the stage whose task owns that partition reads the range
itself (:func:`read_range_batch`), so the records cross neither Spark's Arrow conversion of the
source nor its shuffle. kspark's queries take those rows from ``kspark_kafka_ranges``
(:mod:`~kspark.spark.internals.kafka_ranges`), which makes them on the driver.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kspark.kafka.admin import KafkaAuthenticationError, KafkaUnreachableError
from kspark.kafka.reader import (
    EARLIEST,
    LATEST,
    TP,
    OffsetLookup,
    OffsetRange,
    limit_ranges,
    plan_start,
    read_range,
    report_data_loss,
)

log = logging.getLogger("kspark.kafka")

SKIPPED = "@skipped"
#: the option carrying ``task.timeout.ms`` (how long planning waits for the cluster)
TIMEOUT_OPTION = "kspark.task.timeout.ms"
#: the options of reading in the stages: ``"true"``, and the topology's name of the topic
IN_STAGE_OPTION = "kspark.read_in_stage"
TOPIC_OPTION = "kspark.topic"
IDLE_POLL_S = 0.1

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


class KafkaSource(DataSource):
    """Kafka topics as a streaming source (see the module's documentation for the options)."""

    @classmethod
    def name(cls) -> str:
        return "kspark_kafka"

    def schema(self) -> StructType | str:
        if _in_stage(self.options):
            from kspark.spark.internals.row_schema import ROW_DDL

            return ROW_DDL
        return KAFKA_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options))


class _RangePartition(InputPartition):
    def __init__(self, rng: OffsetRange) -> None:
        self.rng = rng


class _RangesPartition(InputPartition):
    """Every range of a micro-batch, for the one task that writes their range rows."""

    def __init__(self, ranges: list[OffsetRange]) -> None:
        self.ranges = ranges


def _in_stage(options: Any) -> bool:
    return str({k.lower(): v for k, v in dict(options).items()}.get(
        IN_STAGE_OPTION, "false")).lower() == "true"


def encode_offsets(offsets: dict[TP, int], skipped: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    if skipped:
        out[SKIPPED] = int(skipped)
    return out


def decode_offsets(data: dict[str, Any]) -> dict[TP, int]:
    """The partitions' offsets in ``data`` (keys from ``@``, which no topic name has, are
    other facts: :data:`SKIPPED`, ``kafka_ranges.LATEST``)."""
    return {
        (topic, int(p)): int(o)
        for topic, parts in data.items()
        if not topic.startswith("@")
        for p, o in parts.items()
    }


def skipped_offsets(progress: dict[str, Any] | None) -> int:
    """Offsets a ``kspark_kafka`` source skipped (``failOnDataLoss=false``) since its query
    started from scratch, from a streaming query progress (``query.lastProgress``)."""
    total = 0
    for source in (progress or {}).get("sources", []):
        end = source.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if isinstance(end, dict):
            total += int(end.get(SKIPPED, 0))
    return total


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        lowered = {k.lower(): v for k, v in options.items()}
        self.bootstrap = lowered.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise ValueError("kspark_kafka: option kafka.bootstrap.servers is required")
        self.topics = [t.strip() for t in lowered.get("subscribe", "").split(",") if t.strip()]
        self.pattern = lowered.get("subscribepattern")
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("kspark_kafka: give exactly one of subscribe or subscribePattern")
        self.starting = lowered.get("startingoffsets", "earliest").strip()
        limit = lowered.get("maxoffsetspertrigger")
        self.max_per_trigger = int(limit) if limit else None
        self.fail_on_data_loss = lowered.get("failondataloss", "true").lower() != "false"
        self.kafka_config = {
            k[len("kafka.") :]: v
            for k, v in options.items()
            if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers"
        }
        #: how long planning waits for an unreachable cluster (``task.timeout.ms``)
        self.timeout_s = int(lowered.get(TIMEOUT_OPTION, "0")) / 1000
        #: range rows instead of records (see the module's documentation)
        self.in_stage = _in_stage(options)
        self.topic_name = lowered.get(TOPIC_OPTION)
        if self.in_stage and not self.topic_name:
            raise ValueError(f"kspark_kafka: {IN_STAGE_OPTION} needs {TOPIC_OPTION}")
        self._lookup: OffsetLookup | None = None
        self._reported: dict[str, Any] | None = None
        self._idle_since: float | None = None

    # -- driver side: planning ---------------------------------------------------------------
    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.bootstrap or "", self.kafka_config)
        return self._lookup

    def _where(self) -> str:
        return f"pattern {self.pattern!r}" if self.pattern else f"topics {self.topics}"

    def _bounds(self) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
        """Partitions now subscribed, with their earliest and end offsets; while the cluster
        cannot be reached, tried again every second for up to :attr:`timeout_s`."""
        waited_since: float | None = None
        while True:
            try:
                tps = self.lookup.topic_partitions(self.topics or None, self.pattern)
                bounds = tps, self.lookup.earliest(tps), self.lookup.latest(tps)
            except KafkaAuthenticationError:
                raise
            except KafkaUnreachableError as exc:
                now = time.monotonic()
                if waited_since is None:
                    waited_since = now
                    log.warning("%s; reading %s waits up to %.0f s for it (task.timeout.ms)",
                                exc, self._where(), self.timeout_s)
                if now - waited_since >= self.timeout_s:
                    raise KafkaUnreachableError(
                        f"{exc}; the source of {self._where()} waited {now - waited_since:.0f} s "
                        f"(task.timeout.ms = {self.timeout_s * 1000:.0f})") from None
                self._lookup = None  # fresh clients once it is back
                time.sleep(1.0)
                continue
            if waited_since is not None:
                log.warning("Kafka at %s reachable again after %.1f s", self.bootstrap,
                            time.monotonic() - waited_since)
            return bounds

    def initialOffset(self) -> dict:
        tps, low, high = self._bounds()
        if self.starting == "earliest":
            return encode_offsets(low)
        if self.starting == "latest":
            return encode_offsets(high)
        try:
            given = decode_offsets(json.loads(self.starting))
        except (ValueError, AttributeError, TypeError) as exc:
            raise ValueError(
                "kspark_kafka: startingOffsets must be 'earliest', 'latest' or JSON like "
                f'{{"topic": {{"0": 42}}}}, got {self.starting!r}'
            ) from exc
        unknown = sorted(set(given) - set(tps))
        if unknown:
            raise ValueError(
                f"kspark_kafka: startingOffsets names partitions {unknown} that are not among "
                f"the subscribed {self._where()}"
            )
        out = {}
        for tp in tps:
            offset = given.get(tp, EARLIEST)
            out[tp] = low[tp] if offset == EARLIEST else high[tp] if offset == LATEST else offset
        return encode_offsets(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # Spark asks again every few ms while no data comes: ask the broker at most every
        # IDLE_POLL_S then (at most that much more latency for the first new record)
        if self._idle_since is not None:
            time.sleep(max(0.0, self._idle_since + IDLE_POLL_S - time.monotonic()))
        tps, low, high = self._bounds()
        begun = decode_offsets(start)
        skipped = int(start.get(SKIPPED, 0))
        for tp in sorted(set(begun) - set(tps)):
            report_data_loss(
                f"Kafka topic {tp[0]!r} partition {tp[1]}",
                "the partition no longer exists",
                self.fail_on_data_loss,
            )
        ranges = {}
        for tp in tps:
            if tp in begun:
                first, lost = plan_start(tp, begun[tp], low[tp], high[tp], self.fail_on_data_loss)
                skipped += lost
            else:  # a new partition or topic: from its beginning
                first = low[tp]
            ranges[tp] = (first, high[tp])
        if isinstance(limit, ReadMaxRows):
            ends = limit_ranges(ranges, limit.max_rows)
        else:
            ends = {tp: end for tp, (_, end) in ranges.items()}
        self._reported = encode_offsets(high, skipped)
        end = encode_offsets(ends, skipped)
        self._idle_since = time.monotonic() if end == start else None
        return end

    def reportLatestOffset(self) -> dict | None:
        return self._reported

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begun, until = decode_offsets(start), decode_offsets(end)
        out: list[InputPartition] = []
        for tp, stop in sorted(until.items()):
            first = begun.get(tp)
            if first is None or first > stop:  # new partition, or one that went back
                first = self.lookup.earliest([tp])[tp]
            if stop > first:
                out.append(_RangePartition(OffsetRange(tp[0], tp[1], first, stop)))
        if self.in_stage:  # no reading here: one task writes a row per range
            return [_RangesPartition([cast(_RangePartition, p).rng for p in out])] if out else []
        return out

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    # -- executor side: reading --------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        if self.in_stage:
            yield range_rows(cast(_RangesPartition, partition).ranges, self.topic_name or "")
            return
        schema = kafka_arrow_schema()
        headers_type = schema.field("headers").type
        for chunk in read_range(
            self.bootstrap or "", cast(_RangePartition, partition).rng, self.kafka_config,
            self.fail_on_data_loss,
        ):
            stamps = [m.timestamp() for m in chunk]
            headers = [m.headers() for m in chunk]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([m.key() for m in chunk], pa.binary()),
                    pa.array([m.value() for m in chunk], pa.binary()),
                    pa.array([m.topic() for m in chunk], pa.string()),
                    pa.array([m.partition() for m in chunk], pa.int32()),
                    pa.array([m.offset() for m in chunk], pa.int64()),
                    pa.array([s[1] * 1000 for s in stamps], pa.int64()).cast(
                        schema.field("timestamp").type
                    ),
                    # librdkafka: 0 none, 1 create time, 2 log append time; Kafka/Spark: -1, 0, 1
                    pa.array([s[0] - 1 for s in stamps], pa.int32()),
                    pa.array(
                        [
                            None if not h else [{"key": k, "value": v} for k, v in h]
                            for h in headers
                        ],
                        headers_type,
                    ),
                ],
                schema=schema,
            )

    def read_range_batch(self, rng: OffsetRange, topic: str) -> Any:
        """The records of ``rng`` in kspark's input layout (``INPUT_ARROW``), every one named
        ``topic``, read here (in a stage's task); with a ``headers`` column (``HEADERS``) when
        a record has headers."""
        import pyarrow as pa
        from confluent_kafka import Message

        from kspark.records import encode_headers
        from kspark.spark.internals.wire import HEADERS, INPUT_ARROW, repeated

        columns: list[list[Any]] = [[], [], [], [], []]
        keys, values, offsets, stamps, headers = columns
        for chunk in read_range(self.bootstrap or "", rng, self.kafka_config,
                                self.fail_on_data_loss):
            keys += [m.key() for m in chunk]
            values += [m.value() for m in chunk]
            offsets += [m.offset() for m in chunk]
            stamps += [m.timestamp()[1] for m in chunk]
            headers += map(Message.headers, chunk)
        n = len(offsets)
        arrays = [pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                  repeated(topic, pa.string(), n), repeated(rng.partition, pa.int32(), n),
                  pa.array(offsets, pa.int64()), pa.array(stamps, pa.int64())]
        if not any(headers):
            return pa.RecordBatch.from_arrays(arrays, schema=INPUT_ARROW)
        encoded = [encode_headers(tuple(h)) if h else None for h in headers]
        return pa.RecordBatch.from_arrays(
            [*arrays, pa.array(encoded, pa.binary())],
            schema=INPUT_ARROW.append(pa.field(HEADERS, pa.binary())))


#: how the key of a Kafka range row begins (file range rows carry a file's spec instead)
RANGE_ROW_PREFIX = b'{"kafka": '


def is_kafka_range(blob: bytes) -> bool:
    """Whether a range row's key is a Kafka offset range of :func:`range_rows`."""
    return blob.startswith(RANGE_ROW_PREFIX)


def range_rows(ranges: list[OffsetRange], topic: str) -> Any:
    """One range row per offset range (kind ``file``, what a stage reads itself): its key the
    range as JSON (``{"kafka": topic, "range": [kafka topic, partition, start, end]}``), its
    partition the range's, its offset the range's first."""
    from kspark.spark.internals.wire import KIND_FILE, rows_of

    blobs = [json.dumps({"kafka": topic, "range": [r.topic, r.partition, r.start, r.end]}
                        ).encode() for r in ranges]
    return rows_of(KIND_FILE, topic, blobs, [r.partition for r in ranges],
                   [r.start for r in ranges], [0] * len(ranges))


_ARROW_SCHEMA: Any = None


def kafka_arrow_schema() -> Any:
    """The Arrow schema Spark expects for :data:`KAFKA_SCHEMA`."""
    global _ARROW_SCHEMA
    if _ARROW_SCHEMA is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        _ARROW_SCHEMA = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
    return _ARROW_SCHEMA


def kafka_input_frame(frame: Any, topic: str | None = None) -> Any:
    """A DataFrame with the columns of Spark's Kafka source in kspark's input layout (timestamp
    in epoch milliseconds, and the records' headers as Kafka's list, null without any);
    ``topic`` renames every row's topic (the topology's name for it)."""
    from pyspark.sql import functions as F

    from kspark.spark.internals.wire import HEADER_LIST, HEADERS

    headers = (F.col(HEADERS) if HEADERS in frame.columns
               else F.lit(None)).cast(HEADER_LIST).alias(HEADERS)
    return frame.select(
        "key",
        "value",
        F.lit(topic).alias("topic") if topic is not None else F.col("topic"),
        F.col("partition").cast("int"),
        F.col("offset").cast("long"),
        F.unix_millis(F.col("timestamp")).alias("timestamp"),
        headers,
    )
