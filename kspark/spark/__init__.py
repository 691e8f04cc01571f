"""The Spark runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kspark.spark.app import StreamsApp


def __getattr__(name: str) -> object:
    # imported on first use: Spark's Python workers import this package to unpickle a stage's
    # processor and need none of the driver-side app
    if name == "StreamsApp":
        from kspark.spark.app import StreamsApp

        return StreamsApp
    raise AttributeError(f"module 'kspark.spark' has no attribute {name!r}")


__all__ = ["StreamsApp"]
