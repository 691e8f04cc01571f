"""Fixed-key processors (Kafka Streams' KIP-820, ``KStream.process_values``): processors that
may change a record's value, timestamp and headers but never its key, so the stream after
them needs no repartitioning.

A :class:`FixedKeyProcessor` gets :class:`FixedKeyRecord` objects, made by the framework from
the records it receives; it forwards them (or copies made with ``with_value``,
``with_timestamp``, ``with_headers``) through its :class:`FixedKeyProcessorContext`. There is
no ``with_key``: the key of a fixed-key record is the key of the record it was made from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark._duration import Duration
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.punctuation import Cancellable, PunctuationType
from kspark.records import Headers, Record, RecordMetadata, to_headers


class FixedKeyRecord:
    """A record whose key cannot change: key, value, timestamp (ms) and headers."""

    __slots__ = ("_key", "headers", "timestamp", "value")

    def __init__(self, record: Record) -> None:
        self._key = record.key
        self.value = record.value
        self.timestamp = record.timestamp
        self.headers: Headers = record.headers

    @property
    def key(self) -> Any:
        return self._key

    def _with(self, value: Any, timestamp: int | None, headers: Headers) -> FixedKeyRecord:
        return FixedKeyRecord(Record(self._key, value, timestamp, headers))

    def with_value(self, value: Any) -> FixedKeyRecord:
        return self._with(value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> FixedKeyRecord:
        return self._with(self.value, timestamp, self.headers)

    def with_headers(self, headers: Any) -> FixedKeyRecord:
        return self._with(self.value, self.timestamp, to_headers(headers))

    def to_record(self) -> Record:
        return Record(self._key, self.value, self.timestamp, self.headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedKeyRecord) and (
            (self._key, self.value, self.timestamp, self.headers)
            == (other._key, other.value, other.timestamp, other.headers))

    __hash__ = None  # type: ignore[assignment]  # mutable fields, as Record's value

    def __repr__(self) -> str:
        return (f"FixedKeyRecord(key={self._key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp!r}, headers={self.headers!r})")


class FixedKeyProcessorContext:
    """What a fixed-key processor sees of its task: the processor context's methods, with
    :meth:`forward` taking fixed-key records."""

    def __init__(self, context: ProcessorContext) -> None:
        self._context = context

    def forward(self, record: FixedKeyRecord, child_name: str | None = None) -> None:
        """Send ``record`` to every child, or only to ``child_name``."""
        if not isinstance(record, FixedKeyRecord):
            raise TypeError(f"processor {self.processor_name!r} is a fixed-key processor: it "
                            f"forwards FixedKeyRecord objects, got {record!r:.80}")
        self._context.forward(record.to_record(), child_name)

    def schedule(self, interval: Duration, type: PunctuationType,
                 callback: Callable[[int], Any]) -> Cancellable:
        return self._context.schedule(interval, type, callback)

    def get_state_store(self, name: str) -> Any:
        return self._context.get_state_store(name)

    def current_stream_time_ms(self) -> int:
        return self._context.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._context.current_system_time_ms()

    def record_metadata(self) -> RecordMetadata | None:
        return self._context.record_metadata()

    def commit(self) -> None:
        self._context.commit()

    def key_serde(self) -> Any:
        return self._context.key_serde()

    def value_serde(self) -> Any:
        return self._context.value_serde()

    @property
    def processor_state(self) -> dict[str, Any]:
        return self._context.processor_state

    @property
    def task_id(self) -> str:
        return self._context.task_id

    @property
    def partition(self) -> int:
        return self._context.partition

    @property
    def application_id(self) -> str:
        return self._context.application_id

    @property
    def processor_name(self) -> str:
        return self._context.processor_name


class FixedKeyProcessor:
    """Base class of fixed-key processors: ``init`` once, ``process`` per record, ``close`` at
    end (``KStream.process_values``)."""

    context: FixedKeyProcessorContext

    def init(self, context: FixedKeyProcessorContext) -> None:
        self.context = context

    def process(self, record: FixedKeyRecord) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FixedKeyAdapter(Processor):
    """The node of a ``process_values``: runs the fixed-key processor ``supplier()`` makes,
    handing it fixed-key records and a context that forwards only them."""

    def __init__(self, supplier: Callable[[], FixedKeyProcessor]) -> None:
        processor = supplier()
        if not isinstance(processor, FixedKeyProcessor):
            raise TypeError(f"process_values needs a supplier of FixedKeyProcessor objects, "
                            f"got {processor!r:.80}")
        self.processor = processor

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.processor.init(FixedKeyProcessorContext(context))

    def process(self, record: Record) -> None:
        self.processor.process(FixedKeyRecord(record))

    def close(self) -> None:
        self.processor.close()
