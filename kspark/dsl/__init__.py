"""The DSL: StreamsBuilder, KStream, KTable and their grouped and windowed forms.

``Suppressed`` and ``BufferConfig`` (:mod:`kspark.dsl.suppressed`) are importable from here too.
"""

from kspark.dsl.api import (
    BranchedKStream,
    CogroupedKStream,
    GlobalKTable,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedCogroupedKStream,
    SessionWindowedKStream,
    TimeWindowedCogroupedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.builder import StreamsBuilder
from kspark.dsl.joined import Joined, StreamJoined
from kspark.dsl.materialized import Materialized
from kspark.dsl.suppressed import BufferConfig, Suppressed

__all__ = [
    "BranchedKStream",
    "BufferConfig",
    "CogroupedKStream",
    "GlobalKTable",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "SessionWindowedCogroupedKStream",
    "SessionWindowedKStream",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
]

