"""The DSL: StreamsBuilder, KStream, KTable and their grouped and windowed forms.

``Suppressed`` and ``BufferConfig`` (:mod:`kspark.dsl.suppress`) are importable from here too.
"""

from typing import Any

from kspark.dsl.builder import StreamsBuilder
from kspark.dsl.kgrouped_stream import KGroupedStream
from kspark.dsl.kgrouped_table import KGroupedTable
from kspark.dsl.kstream import KStream
from kspark.dsl.ktable import KTable
from kspark.dsl.materialized import Materialized
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


def __getattr__(name: str) -> Any:
    # imported on first use, so this package loads while kspark.dsl.suppress is being written
    if name in ("Suppressed", "BufferConfig"):
        from kspark.dsl import suppress

        return getattr(suppress, name)
    raise AttributeError(f"module 'kspark.dsl' has no attribute {name!r}")
