"""kspark.io.typed without Spark: each serde kind's column, windowed keys, update streams, user
schemas, and errors naming the topic and the column."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from kspark import Materialized, StreamsBuilder, StreamsConfig, serdes
from kspark.errors import StreamsError
from kspark.io.schema import SINK_SCHEMA
from kspark.io.typed import KeyColumns, TypedLayout, arrow_type, column_for, layout_for
from kspark.windows import Window, Windowed


def _raw(keys, values):
    n = len(keys)
    return pa.table([keys, values, list(range(1000, 1000 + n)), [0] * n], schema=SINK_SCHEMA)


def _layout(key_serde, value_serde, value_schema=None, tombstones=False):
    return TypedLayout("t", KeyColumns(key_serde), column_for(value_serde, value_schema),
                       tombstones)


def test_each_serde_kind_has_its_column_type():
    layout = _layout(serdes.TimeWindowed(serdes.Long(), 500), serdes.Double())
    key = serdes.TimeWindowed(serdes.Long(), 500).serialize(Windowed(7, Window(1000, 1500)))
    table = layout.decode(_raw([key, None], [struct.pack(">d", 2.5), None]))
    assert [str(f.type) for f in table.schema] == [
        "int64", "timestamp[ms, tz=UTC]", "timestamp[ms, tz=UTC]", "int64", "int64", "double",
        "timestamp[ms, tz=UTC]", "int64", "int32"]
    first = table.to_pylist()[0]
    assert (first["key"], first["window_start_ms"], first["window_end_ms"], first["value"]) == (
        7, 1000, 1500, 2.5)
    assert table.column("key").null_count == 1
    assert _layout(serdes.Bytes(), serdes.Json()).decode(_raw([b"\xff"], [b'{"a":1}'])) \
        .to_pylist()[0]["value"] == '{"a":1}'


def test_other_serdes_are_decoded_record_by_record_as_json_text():
    value = serdes.Pickle().serialize({"pages": ("/", "/cart")})
    row = _layout(serdes.String(), serdes.Pickle()).decode(_raw([b"k"], [value])).to_pylist()[0]
    assert row["value"] == '{"pages": ["/", "/cart"]}'


def test_a_json_schema_types_the_values_and_names_the_column_that_does_not_fit():
    schema = pa.struct([("page", pa.string()), ("n", pa.int64())])
    layout = _layout(serdes.String(), serdes.Json(), schema)
    row = layout.decode(_raw([b"a"], [b'{"page":"/"}'])).to_pylist()[0]
    assert row["value"] == {"page": "/", "n": None}
    with pytest.raises(StreamsError, match=r"^sink topic 't', column 'value.extra': the schema "
                                           r"has no field 'extra' \(its fields: page, n\)$"):
        layout.decode(_raw([b"a"], [b'{"page":"/","extra":1}']))
    with pytest.raises(StreamsError, match=r"^sink topic 't', column 'value.n': 'x' is not a "
                                           r"whole number for int64$"):
        layout.decode(_raw([b"a"], [b'{"n":"x"}']))


def test_bytes_that_do_not_fit_their_serde_name_the_column():
    with pytest.raises(StreamsError, match="column 'value': size of data received by Long "
                                           "deserializer is not 8 but 3"):
        _layout(serdes.String(), serdes.Long()).decode(_raw([b"a"], [b"abc"]))
    with pytest.raises(StreamsError, match="column 'key': String bytes are not UTF-8"):
        _layout(serdes.String(), serdes.Long()).decode(_raw([b"\xff"], [None]))
    with pytest.raises(StreamsError, match="column 'key': SessionWindowed key of 3 bytes"):
        _layout(serdes.SessionWindowed(serdes.String()), serdes.Long()).decode(
            _raw([b"abc"], [None]))


def test_spark_types_become_arrow_types():
    class SparkLike:  # what pyspark's StructType.jsonValue() gives
        def jsonValue(self):
            return {"type": "struct", "fields": [
                {"name": "page", "type": "string", "nullable": True, "metadata": {}},
                {"name": "tags", "type": {"type": "array", "elementType": "long",
                                          "containsNull": True}, "nullable": True,
                 "metadata": {}}]}

    assert arrow_type(SparkLike()) == pa.struct([("page", pa.string()),
                                                 ("tags", pa.list_(pa.int64()))])
    assert arrow_type(pa.schema([("a", pa.int32())])) == pa.struct([("a", pa.int32())])


class _App:
    def __init__(self, topology):
        self.topology, self.config = topology, StreamsConfig.of(None, application_id="a")


def test_layouts_of_a_topology_update_streams_and_raw_topics():
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", serdes.String(), serdes.Json())
    clicks.to("copy")
    clicks.group_by_key().count(Materialized("n")).to_stream().map_values(lambda v: v) \
        .to("counts", value_serde=serdes.Long())
    app = _App(builder.build())
    copy = layout_for(app, "copy")
    assert copy is not None and not copy.tombstones  # a stream, default serdes (Json)
    assert isinstance(copy.key.inner.serde, serdes.String)
    counts = layout_for(app, "counts")
    assert counts is not None and counts.tombstones and "is_tombstone" in counts.schema.names
    assert layout_for(app, "clicks") is None and layout_for(app, "a-n-changelog") is None
