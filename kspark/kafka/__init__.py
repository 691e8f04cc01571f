"""Kafka without Spark: the embedded broker, topic administration, offset-range reading and the
exactly-once batch writer that kspark's Spark source and sink are built on."""

from kspark.kafka.admin import TopicError, TopicSpec, ensure_topics, topology_topics
from kspark.kafka.broker import BrokerError, EmbeddedBroker, tansu_binary

__all__ = [
    "BrokerError",
    "EmbeddedBroker",
    "TopicError",
    "TopicSpec",
    "ensure_topics",
    "tansu_binary",
    "topology_topics",
]
