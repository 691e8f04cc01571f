"""kspark: Kafka Streams' stateful processing model in Python, running on Apache Spark."""

__version__ = "0.1.0"

# -- DSL ---------------------------------------------------------------------------------------
from typing import Any as _Any

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


def __getattr__(name: str) -> _Any:
    # Suppressed and BufferConfig (kspark.dsl.suppress) are imported on first use
    if name in ("Suppressed", "BufferConfig"):
        from kspark.dsl import suppress

        return getattr(suppress, name)
    raise AttributeError(f"module 'kspark' has no attribute {name!r}")
