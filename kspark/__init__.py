"""kspark: Kafka Streams' stateful processing model in Python, running on Apache Spark.

Everything API.md lists is importable from here; ``kspark.serdes`` and ``kspark.io`` are modules.
"""

__version__ = "0.1.0"

from kspark import serdes
from kspark.config import StreamsConfig
from kspark.dsl import (
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    Materialized,
    SessionWindowedKStream,
    StreamsBuilder,
    TimeWindowedKStream,
)
from kspark.dsl.suppress import BufferConfig, Suppressed
from kspark.errors import (
    BufferFullError,
    InvalidStateStoreError,
    KsparkError,
    NoSuchElementError,
    SerializationError,
    StreamsError,
    TopologyError,
)
from kspark.processor import Cancellable, Processor, ProcessorContext, PunctuationType
from kspark.records import Change, KeyValue, Record, RecordMetadata, ValueAndTimestamp
from kspark.state.builders import StoreBuilder, Stores
from kspark.state.changelog import changelog_topic
from kspark.testing import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver
from kspark.topology import Topology, TopologyDescription
from kspark.windows import (
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Window,
    Windowed,
)


def __getattr__(name: str) -> object:
    # the Spark runtime imports pyspark: load it only when asked for
    if name == "StreamsApp":
        from kspark.spark import StreamsApp

        return StreamsApp
    if name == "io":
        import kspark.io as io_module

        return io_module
    raise AttributeError(f"module 'kspark' has no attribute {name!r}")


__all__ = [
    "BufferConfig",
    "BufferFullError",
    "Cancellable",
    "Change",
    "EmitStrategy",
    "InvalidStateStoreError",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KeyValue",
    "KsparkError",
    "Materialized",
    "NoSuchElementError",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "RecordMetadata",
    "SerializationError",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StoreBuilder",
    "Stores",
    "StreamsApp",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsError",
    "Suppressed",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyDescription",
    "TopologyError",
    "TopologyTestDriver",
    "ValueAndTimestamp",
    "Window",
    "Windowed",
    "changelog_topic",
    "serdes",
]
