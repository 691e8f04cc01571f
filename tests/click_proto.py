"""A Protobuf message type for the tests, built from its descriptor as ``protoc`` would
generate it (no protoc here): ``kspark.test.Click {page, count, tags, referrer {host}, kind}``."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="kspark_test/click.proto",
                                               package="kspark.test", syntax="proto3")
    referrer = proto.message_type.add(name="Referrer")
    referrer.field.add(name="host", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    kind = proto.enum_type.add(name="Kind")
    kind.value.add(name="VIEW", number=0)
    kind.value.add(name="BUY", number=1)
    click = proto.message_type.add(name="Click")
    click.field.add(name="page", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    click.field.add(name="count", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    click.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    click.field.add(name="referrer", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".kspark.test.Referrer")
    click.field.add(name="kind", number=5, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                    type_name=".kspark.test.Kind")
    return proto


_POOL = descriptor_pool.Default()
try:
    _POOL.FindFileByName("kspark_test/click.proto")
except KeyError:
    _POOL.Add(_file())
Click = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kspark.test.Click"))
Referrer = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kspark.test.Referrer"))
