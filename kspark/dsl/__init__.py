"""The DSL: StreamsBuilder, KStream, KTable and their grouped and windowed forms.

``Suppressed`` and ``BufferConfig`` (:mod:`kspark.dsl.suppressed`) are importable from here too.
"""

from kspark.dsl.api import (
    BranchedKStream,
    GlobalKTable,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.builder import StreamsBuilder
from kspark.dsl.joined import Joined, StreamJoined
from kspark.dsl.materialized import Materialized
from kspark.dsl.suppressed import BufferConfig, Suppressed

__all__ = [
    "BranchedKStream",
    "BufferConfig",
    "GlobalKTable",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "SessionWindowedKStream",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TimeWindowedKStream",
]

