"""Serdes: Kafka's built-in formats (:mod:`kspark.serdes.core`, compiled) and the Schema
Registry's (:mod:`kspark.serdes.registry`: Avro, Protobuf and JSON Schema, the ``registry``
extra)."""

from kspark.serdes.core import (
    MAX_LONG,
    Bytes,
    Data,
    Double,
    Json,
    Long,
    Pickle,
    Serde,
    SessionWindowed,
    String,
    TimeWindowed,
    as_serde,
    deserializer_of,
    serializer_of,
)
from kspark.serdes.registry import Avro, JsonSchema, Protobuf

__all__ = [
    "MAX_LONG",
    "Avro",
    "Bytes",
    "Data",
    "Double",
    "Json",
    "JsonSchema",
    "Long",
    "Pickle",
    "Protobuf",
    "Serde",
    "SessionWindowed",
    "String",
    "TimeWindowed",
    "as_serde",
    "deserializer_of",
    "serializer_of",
]
