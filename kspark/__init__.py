"""kspark: Kafka Streams' stateful processing model in Python, running on Apache Spark.

Everything docs/api.md lists at the top level is importable from here; ``kspark.serdes`` and
``kspark.io`` are modules.
"""

__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING

from kspark import compiled as _compiled

_compiled.install()  # before any compiled module is imported: compiled or pure Python

if TYPE_CHECKING:
    from kspark import serdes
    from kspark.config import StreamsConfig
    from kspark.dsl import (
        BranchedKStream,
        GlobalKTable,
        Joined,
        KGroupedStream,
        KGroupedTable,
        KStream,
        KTable,
        Materialized,
        SessionWindowedKStream,
        StreamJoined,
        StreamsBuilder,
        TimeWindowedKStream,
    )
    from kspark.dsl.suppressed import BufferConfig, Suppressed
    from kspark.errors import (
        BufferFullError,
        InvalidStateStoreError,
        KsparkError,
        NoSuchElementError,
        SerializationError,
        StreamsError,
        TopologyError,
    )
    from kspark.processor import (
        Cancellable,
        FixedKeyProcessor,
        FixedKeyRecord,
        Processor,
        ProcessorContext,
        PunctuationType,
    )
    from kspark.records import (
        Change,
        KeyValue,
        Record,
        RecordMetadata,
        SinkContext,
        ValueAndTimestamp,
    )
    from kspark.spark import StreamsApp
    from kspark.state.builders import StoreBuilder, Stores
    from kspark.state.internals.changelog import changelog_topic
    from kspark.testing import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver
    from kspark.topology import Topology, TopologyDescription
    from kspark.windows import (
        EmitStrategy,
        JoinWindows,
        SessionWindows,
        SlidingWindows,
        TimeWindows,
        Window,
        Windowed,
    )

#: where each public name lives; imported on first use, so that ``import kspark`` (and so
#: every Spark Python worker that unpickles a kspark object) stays cheap
_EXPORTS: dict[str, str] = {
    "StreamsConfig": "kspark.config",
    "GlobalKTable": "kspark.dsl",
    "Joined": "kspark.dsl",
    "StreamJoined": "kspark.dsl",
    "KGroupedStream": "kspark.dsl",
    "KGroupedTable": "kspark.dsl",
    "KStream": "kspark.dsl",
    "BranchedKStream": "kspark.dsl",
    "KTable": "kspark.dsl",
    "Materialized": "kspark.dsl",
    "SessionWindowedKStream": "kspark.dsl",
    "StreamsBuilder": "kspark.dsl",
    "TimeWindowedKStream": "kspark.dsl",
    "BufferConfig": "kspark.dsl.suppressed",
    "Suppressed": "kspark.dsl.suppressed",
    "BufferFullError": "kspark.errors",
    "InvalidStateStoreError": "kspark.errors",
    "KsparkError": "kspark.errors",
    "NoSuchElementError": "kspark.errors",
    "SerializationError": "kspark.errors",
    "StreamsError": "kspark.errors",
    "TopologyError": "kspark.errors",
    "Cancellable": "kspark.processor",
    "Processor": "kspark.processor",
    "FixedKeyProcessor": "kspark.processor",
    "FixedKeyRecord": "kspark.processor",
    "ProcessorContext": "kspark.processor",
    "PunctuationType": "kspark.processor",
    "Change": "kspark.records",
    "KeyValue": "kspark.records",
    "Record": "kspark.records",
    "RecordMetadata": "kspark.records",
    "SinkContext": "kspark.records",
    "ValueAndTimestamp": "kspark.records",
    "StoreBuilder": "kspark.state.builders",
    "Stores": "kspark.state.builders",
    "changelog_topic": "kspark.state.internals.changelog",
    "TestInputTopic": "kspark.testing",
    "TestOutputTopic": "kspark.testing",
    "TestRecord": "kspark.testing",
    "TopologyTestDriver": "kspark.testing",
    "Topology": "kspark.topology",
    "TopologyDescription": "kspark.topology",
    "EmitStrategy": "kspark.windows",
    "JoinWindows": "kspark.windows",
    "SessionWindows": "kspark.windows",
    "SlidingWindows": "kspark.windows",
    "TimeWindows": "kspark.windows",
    "Window": "kspark.windows",
    "Windowed": "kspark.windows",
    "StreamsApp": "kspark.spark",
}
_MODULES = {"serdes": "kspark.serdes", "io": "kspark.io"}

def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is not None:
        return importlib.import_module(module)
    source = _EXPORTS.get(name)
    if source is None:
        raise AttributeError(f"module 'kspark' has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

__all__ = [
    "BranchedKStream",
    "BufferConfig",
    "BufferFullError",
    "Cancellable",
    "Change",
    "EmitStrategy",
    "FixedKeyProcessor",
    "FixedKeyRecord",
    "GlobalKTable",
    "InvalidStateStoreError",
    "JoinWindows",
    "Joined",
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
    "SinkContext",
    "SlidingWindows",
    "StoreBuilder",
    "Stores",
    "StreamJoined",
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
