"""The Spark runtime."""

from kspark.spark.app import StreamsApp

__all__ = ["StreamsApp"]
