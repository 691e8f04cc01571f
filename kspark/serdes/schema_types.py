"""The Arrow types of schemas (typed results of Schema Registry serdes): an Avro schema, a
Protobuf message descriptor, a JSON schema."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

_AVRO_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
_AVRO_LOGICAL = {
    "timestamp-millis": pa.timestamp("ms", tz="UTC"), "timestamp-micros": pa.timestamp("us",
                                                                                      tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us"),
    "date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
    "uuid": pa.string(),
}


def avro_arrow_type(schema: Any, named: dict[str, pa.DataType] | None = None) -> pa.DataType:
    """The Arrow type of an Avro schema (parsed JSON): a record a struct, an array a list, a
    map a map from strings, an enum a string, a union with null its other branch."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise TypeError(f"Avro type {schema!r} is not defined before its use")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise TypeError(f"an Avro union of {schema!r} has no column type (only a type or "
                            "null)")
        return avro_arrow_type(branches[0], named)
    kind, logical = schema["type"], schema.get("logicalType")
    if logical in _AVRO_LOGICAL:
        return _AVRO_LOGICAL[logical]
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind == "record":
        struct = pa.struct([pa.field(f["name"], avro_arrow_type(f["type"], named))
                            for f in schema["fields"]])
        named[schema["name"]] = struct
        if "namespace" in schema:
            named[f"{schema['namespace']}.{schema['name']}"] = struct
        return struct
    if kind == "enum":
        named[schema["name"]] = pa.string()
        return pa.string()
    if kind == "fixed":
        return pa.binary(int(schema["size"]))
    if kind == "array":
        return pa.list_(avro_arrow_type(schema["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), avro_arrow_type(schema["values"], named))
    return avro_arrow_type(kind, named)


#: Protobuf field types (``FieldDescriptor.TYPE_*``) by number
_PROTO_TYPES = {
    1: pa.float64(), 2: pa.float32(), 3: pa.int64(), 4: pa.uint64(), 5: pa.int32(),
    6: pa.uint64(), 7: pa.uint32(), 8: pa.bool_(), 9: pa.string(), 12: pa.binary(),
    13: pa.uint32(), 14: pa.string(), 15: pa.int32(), 16: pa.int64(), 17: pa.int32(),
    18: pa.int64(),
}
_PROTO_MESSAGE, _PROTO_GROUP = 11, 10


def proto_arrow_type(descriptor: Any) -> pa.DataType:
    """The Arrow type of a Protobuf message descriptor: a struct of its fields (a repeated
    field a list, a map field a map, an enum its value's name)."""
    fields = []
    for field in descriptor.fields:
        if field.type in (_PROTO_MESSAGE, _PROTO_GROUP):
            options = field.message_type.GetOptions()
            if options.map_entry:
                key = field.message_type.fields_by_name["key"]
                value = field.message_type.fields_by_name["value"]
                fields.append(pa.field(field.name, pa.map_(_proto_single(key),
                                                           _proto_single(value))))
                continue
        single = _proto_single(field)
        repeated = field.is_repeated
        fields.append(pa.field(field.name, pa.list_(single) if repeated else single))
    return pa.struct(fields)


def _proto_single(field: Any) -> pa.DataType:
    if field.type in (_PROTO_MESSAGE, _PROTO_GROUP):
        return proto_arrow_type(field.message_type)
    return _PROTO_TYPES[field.type]


_JSON_TYPES = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(),
               "boolean": pa.bool_()}


def json_schema_arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type of a JSON schema: an object a struct of its properties, an array a list
    of its items; a type list with ``null`` its other type."""
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise TypeError(f"a JSON schema of types {kind!r} has no column type")
        kind = others[0]
    if kind == "object":
        return pa.struct([pa.field(name, json_schema_arrow_type(spec))
                          for name, spec in schema.get("properties", {}).items()])
    if kind == "array":
        return pa.list_(json_schema_arrow_type(schema.get("items", {"type": "string"})))
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    raise TypeError(f"a JSON schema of type {kind!r} has no column type")
