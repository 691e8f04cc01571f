"""Kafka without Spark: the embedded Apache Kafka broker, topic administration, offset-range
reading and the transactional batch writer that kspark's Spark source and sink are built on."""

from kspark.kafka.acls import AclNeed, KafkaAuthorizationError
from kspark.kafka.admin import (
    KafkaAuthenticationError,
    KafkaUnreachableError,
    TopicError,
    TopicSpec,
    ensure_topics,
    topology_topics,
)
from kspark.kafka.broker import KAFKA_VERSION, BrokerError, EmbeddedBroker

__all__ = [
    "KAFKA_VERSION",
    "AclNeed",
    "BrokerError",
    "EmbeddedBroker",
    "KafkaAuthenticationError",
    "KafkaAuthorizationError",
    "KafkaUnreachableError",
    "TopicError",
    "TopicSpec",
    "ensure_topics",
    "topology_topics",
]
