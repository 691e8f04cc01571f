"""The DSL: StreamsBuilder, KStream, KTable and their grouped and windowed forms.

``Suppressed`` and ``BufferConfig`` (:mod:`kspark.dsl.suppress`) are importable from here too.
"""

from kspark.dsl.builder import StreamsBuilder
from kspark.dsl.kgrouped_stream import KGroupedStream
from kspark.dsl.kgrouped_table import KGroupedTable
from kspark.dsl.kstream import KStream
from kspark.dsl.ktable import KTable
from kspark.dsl.materialized import Materialized
from kspark.dsl.suppress import BufferConfig, Suppressed
from kspark.dsl.windowed_kstream import SessionWindowedKStream, TimeWindowedKStream

__all__ = [
    "BufferConfig",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "SessionWindowedKStream",
    "StreamsBuilder",
    "Suppressed",
    "TimeWindowedKStream",
]

