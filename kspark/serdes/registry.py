"""Serdes in the Schema Registry's wire format (magic byte 0, a 4-byte schema id, the payload;
Protobuf's message indexes after the id), through confluent-kafka's schema-registry client and
serializers (the ``registry`` extra): :class:`Avro`, :class:`Protobuf`, :class:`JsonSchema`.

``registry`` is the registry's URL, a dict of the client's settings, or a
``SchemaRegistryClient`` (e.g. ``SchemaRegistryClient.new_client({"url": "mock://name"})``,
an in-process fake, used as it is). A serde naming subjects by topic (the default, Kafka's
``TopicNameStrategy``) is bound to its topic where the topology reads or writes one
(:func:`for_topic`); ``subject_name_strategy="record"`` or ``"topic_record"`` name them by the
record's full name. Each process builds its own client and serializers on first use, so the
serdes travel to Spark's executors as their settings."""

from __future__ import annotations

import copy
import json
import threading
import time
from typing import Any, ClassVar

from kspark.errors import SerializationError
from kspark.serdes.core import Serde, SessionWindowed, TimeWindowed
from kspark.serdes.schema_types import avro_arrow_type, json_schema_arrow_type, proto_arrow_type

STRATEGIES = ("topic", "record", "topic_record")
#: attempts to register a schema that a concurrent writer is registering too
_REGISTER_ATTEMPTS = 5
#: one client per registry and process (a mock registry's records live in its client)
_CLIENTS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _confluent() -> Any:
    try:
        import confluent_kafka.schema_registry as sr
    except ImportError:
        raise SerializationError(
            "Schema Registry serdes need confluent-kafka's schema-registry extras: "
            "pip install 'kspark[registry]'") from None
    return sr


def registry_client(registry: Any) -> Any:
    """The process's client of ``registry`` (a URL, a dict of settings, or a client)."""
    if not isinstance(registry, str | dict):
        return registry
    conf = {"url": registry} if isinstance(registry, str) else dict(registry)
    key = json.dumps(conf, sort_keys=True, default=str)
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = _confluent().SchemaRegistryClient.new_client(conf)
        return client


class SchemaRegistrySerde(Serde):
    """What the three formats share: subjects, the wire format's header, errors naming the
    schema id, pickling by settings."""

    name: ClassVar[str] = "SchemaRegistry"

    def __init__(self, registry: Any, *, is_key: bool = False,
                 subject_name_strategy: str = "topic", config: dict[str, Any] | None = None
                 ) -> None:
        if subject_name_strategy not in STRATEGIES:
            raise ValueError(f"{self.name}: subject_name_strategy must be one of {STRATEGIES}, "
                             f"got {subject_name_strategy!r}")
        self.registry = registry
        self.is_key = is_key
        self.subject_name_strategy = subject_name_strategy
        self.config = dict(config or {})
        self.topic: str | None = None
        self._codec: tuple[Any, Any] | None = None

    @property
    def pure(self) -> bool:
        return True

    # -- what each format gives --------------------------------------------------------------
    def _settings(self) -> tuple[Any, ...]:
        """What else makes two serdes of this format equal (the schema, the message type)."""
        raise NotImplementedError

    def _make_codec(self, client: Any, conf: dict[str, Any]) -> tuple[Any, Any]:
        """confluent-kafka's serializer (``None`` when the serde only deserializes) and
        deserializer."""
        raise NotImplementedError

    def column_type(self) -> Any:
        """The Arrow type of the values (typed results), ``None`` when unknown."""
        return None

    def plain(self, value: Any) -> Any:
        """``value`` as plain Python values of :meth:`column_type`."""
        return value

    # -- serde -------------------------------------------------------------------------------
    def for_topic(self, topic: str) -> SchemaRegistrySerde:
        """This serde naming its subjects after ``topic``."""
        if self.topic == topic:
            return self
        bound = copy.copy(self)
        bound.topic, bound._codec = topic, None
        return bound

    def _context(self) -> Any:
        from confluent_kafka.serialization import MessageField, SerializationContext

        return SerializationContext(self.topic or "",
                                    MessageField.KEY if self.is_key else MessageField.VALUE)

    def _codecs(self) -> tuple[Any, Any]:
        if self._codec is None:
            sr = _confluent()
            strategy = {"topic": sr.topic_subject_name_strategy,
                        "record": sr.record_subject_name_strategy,
                        "topic_record": sr.topic_record_subject_name_strategy}
            conf = {"subject.name.strategy": strategy[self.subject_name_strategy],
                    **self.config}
            self._codec = self._make_codec(registry_client(self.registry), conf)
        return self._codec

    def _serialize(self, value: Any) -> bytes:
        serializer = self._codecs()[0]
        if serializer is None:
            raise TypeError("it has no schema to write with (it only deserializes)")
        if self.subject_name_strategy != "record" and self.topic is None:
            raise TypeError(
                "no topic to name the subject after (a source, a sink or a test topic binds "
                "one; elsewhere, as for a store's changelog, use subject_name_strategy="
                "'record')")
        context, attempts = self._context(), 0
        while True:
            try:
                out: bytes = serializer(value, context)
                return out
            except _confluent().SchemaRegistryError as exc:
                # two writers registering one new subject at once: a registry may refuse the
                # second (Apicurio's Confluent API answers 409); it is registered now
                attempts += 1
                if exc.http_status_code != 409 or attempts >= _REGISTER_ATTEMPTS:
                    raise
                time.sleep(0.05 * attempts)

    def _deserialize(self, data: bytes) -> Any:
        if len(data) < 5 or data[0] != 0:
            raise ValueError(f"not in the Schema Registry's wire format (magic byte "
                             f"{data[:1].hex() or 'missing'}, {len(data)} bytes)")
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            return self._codecs()[1](data, self._context())
        except Exception as exc:
            raise SerializationError(
                f"{self.name} serde cannot deserialize a record of schema id {schema_id}: "
                f"{type(exc).__name__}: {exc}") from exc

    # -- identity ----------------------------------------------------------------------------
    def _key(self) -> tuple[Any, ...]:
        registry = self.registry if isinstance(self.registry, str) else (
            json.dumps(self.registry, sort_keys=True, default=str)
            if isinstance(self.registry, dict) else id(self.registry))
        return (type(self), registry, self.is_key, self.subject_name_strategy,
                json.dumps(self.config, sort_keys=True, default=repr), self.topic,
                self._settings())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaRegistrySerde) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:
        if not isinstance(self.registry, str | dict):
            raise TypeError(f"{self.name} serde: a registry client object stays in its process; "
                            "give the registry's URL or settings to run on Spark")
        state = {k: v for k, v in vars(self).items() if k != "_codec"}
        return _rebuilt, (type(self), state)

    def __repr__(self) -> str:
        topic = f", topic={self.topic!r}" if self.topic else ""
        return f"{self.name}(is_key={self.is_key}{topic})"


def _rebuilt(cls: type[SchemaRegistrySerde], state: dict[str, Any]) -> SchemaRegistrySerde:
    serde = cls.__new__(cls)
    vars(serde).update(state)
    serde._codec = None
    return serde


#: Avro's primitive type names: a schema of one of them may be given bare (``"string"``)
_AVRO_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def _schema_text(schema: Any) -> str | None:
    """A schema as JSON text (a dict dumped; a bare Avro primitive name quoted)."""
    if schema is None:
        return None
    if isinstance(schema, str):
        return json.dumps(schema) if schema in _AVRO_PRIMITIVES else schema
    return json.dumps(schema)


class _WithSchema(SchemaRegistrySerde):
    """A format whose serde may be given a schema (Avro, JSON Schema)."""

    def __init__(self, registry: Any, schema: Any = None, *, is_key: bool = False,
                 subject_name_strategy: str = "topic", config: dict[str, Any] | None = None
                 ) -> None:
        super().__init__(registry, is_key=is_key, subject_name_strategy=subject_name_strategy,
                         config=config)
        self.schema = _schema_text(schema)

    def _settings(self) -> tuple[Any, ...]:
        return (self.schema,)


class Avro(_WithSchema):
    """Avro records as dicts. ``schema`` (JSON text or a dict) writes, and reads as the reader
    schema (records written with an older compatible schema are resolved to it); without it
    the serde only deserializes, each record with the schema it was written with."""

    name = "Avro"

    def _make_codec(self, client: Any, conf: dict[str, Any]) -> tuple[Any, Any]:
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        writer = None if self.schema is None else AvroSerializer(client, self.schema, conf=conf)
        return writer, AvroDeserializer(client, self.schema)

    def column_type(self) -> Any:
        return None if self.schema is None else avro_arrow_type(json.loads(self.schema))


class Protobuf(SchemaRegistrySerde):
    """Messages of ``message_type`` (a generated message class; importable wherever the serde
    runs)."""

    name = "Protobuf"

    def __init__(self, registry: Any, message_type: Any, *, is_key: bool = False,
                 subject_name_strategy: str = "topic", config: dict[str, Any] | None = None
                 ) -> None:
        super().__init__(registry, is_key=is_key, subject_name_strategy=subject_name_strategy,
                         config=config)
        self.message_type = message_type

    def _settings(self) -> tuple[Any, ...]:
        return (self.message_type,)

    def _make_codec(self, client: Any, conf: dict[str, Any]) -> tuple[Any, Any]:
        from confluent_kafka.schema_registry.protobuf import (
            ProtobufDeserializer,
            ProtobufSerializer,
        )

        reader = ProtobufDeserializer(self.message_type, {"use.deprecated.format": False},
                                      schema_registry_client=client)
        return ProtobufSerializer(self.message_type, client, conf=conf), reader

    def column_type(self) -> Any:
        return proto_arrow_type(self.message_type.DESCRIPTOR)

    def plain(self, value: Any) -> Any:
        return None if value is None else _message_dict(value)


def _message_dict(message: Any) -> dict[str, Any]:
    """A message's fields as plain values (defaults included, an unset message field
    ``None``, enums by name, a map as its pairs)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            inner = field.message_type.fields_by_name["value"]
            out[field.name] = [(k, _single(inner, v)) for k, v in value.items()]
        elif field.is_repeated:
            out[field.name] = [_single(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _single(field, value)
    return out


def _single(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return _message_dict(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


class JsonSchema(_WithSchema):
    """JSON documents validated against ``schema`` (JSON text or a dict) when written; without
    it the serde only deserializes."""

    name = "JsonSchema"

    def _make_codec(self, client: Any, conf: dict[str, Any]) -> tuple[Any, Any]:
        from confluent_kafka.schema_registry.json_schema import (
            JSONDeserializer,
            JSONSerializer,
        )

        writer = None if self.schema is None else JSONSerializer(self.schema, client, conf=conf)
        return writer, JSONDeserializer(self.schema, schema_registry_client=client)

    def column_type(self) -> Any:
        return None if self.schema is None else json_schema_arrow_type(json.loads(self.schema))


def for_topic(serde: Any, topic: str) -> Any:
    """``serde`` naming its subjects after ``topic`` (inside a windowed serde too); any other
    serde as it is."""
    if isinstance(serde, SchemaRegistrySerde):
        return serde.for_topic(topic)
    if isinstance(serde, SessionWindowed) and isinstance(serde.inner, SchemaRegistrySerde):
        return SessionWindowed(serde.inner.for_topic(topic))
    if isinstance(serde, TimeWindowed) and isinstance(serde.inner, SchemaRegistrySerde):
        return TimeWindowed(serde.inner.for_topic(topic), serde.window_size)
    return serde
