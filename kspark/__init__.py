"""kspark: Kafka Streams' stateful processing model in Python, running on Apache Spark."""

__version__ = "0.1.0"
