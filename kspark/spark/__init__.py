"""The Spark runtime: :class:`StreamsApp` runs a topology as one Structured Streaming query
(:mod:`kspark.spark.session` makes the local session; the rest is in ``internals``);
:func:`table` and :func:`foreach_batch` are the sinks that need Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kspark.spark.app import StreamsApp
    from kspark.spark.internals.kafka_source import skipped_offsets
    from kspark.spark.internals.table_sinks import foreach_batch, table


def __getattr__(name: str) -> object:
    # imported on first use: Spark's Python workers import this package to unpickle a stage's
    # processor and need none of the driver-side app
    if name == "StreamsApp":
        from kspark.spark.app import StreamsApp

        return StreamsApp
    if name == "skipped_offsets":
        from kspark.spark.internals.kafka_source import skipped_offsets

        return skipped_offsets
    if name in ("table", "foreach_batch"):  # sinks that need Spark (kspark.io's do not)
        from kspark.spark.internals import table_sinks

        return getattr(table_sinks, name)
    raise AttributeError(f"module 'kspark.spark' has no attribute {name!r}")


__all__ = ["StreamsApp", "foreach_batch", "skipped_offsets", "table"]
