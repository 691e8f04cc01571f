"""The records a stage's task reads (``kspark.spark.internals.wire``): keys and values are
dictionary-encoded where they repeat and left as they are where nearly every one is distinct
(a changelog's keys), and tables of both kinds read as one give the records in order."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.spark.internals.wire import INPUT_ARROW, concat_records, records_of, task_records


def batch(keys: list[bytes], values: list[bytes | None]) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(["t"] * n),
         pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
         pa.array(range(n), pa.int64())], schema=INPUT_ARROW)


def test_distinct_keys_stay_plain_and_repeating_values_are_encoded():
    n = 5000
    records = task_records(batch([b"key-%d" % i for i in range(n)],
                                 [None if i % 7 == 0 else b"v%d" % (i % 3) for i in range(n)]))
    assert records.schema.field("key").type == pa.binary()
    assert pa.types.is_dictionary(records.schema.field("value").type)
    assert records.column(0).to_pylist() == [b"key-%d" % i for i in range(n)]
    assert records.column(1).to_pylist() == [
        None if i % 7 == 0 else b"v%d" % (i % 3) for i in range(n)]
    # a short column is encoded whatever it holds
    short = task_records(batch([b"a", b"b"], [b"x", b"y"]))
    assert pa.types.is_dictionary(short.schema.field("key").type)


PIECES = st.lists(st.tuples(
    st.lists(st.tuples(st.binary(max_size=3), st.one_of(st.none(), st.binary(max_size=2))),
             min_size=1, max_size=6),
    st.booleans(), st.booleans()), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(PIECES)
def test_tables_encoded_or_not_read_as_one_in_order(pieces):
    tables = []
    for rows, encode_key, encode_value in pieces:
        table = pa.Table.from_batches([batch([k for k, _ in rows], [v for _, v in rows])]
                                      ).select(["key", "value", "timestamp", "offset"])
        for name, encode in (("key", encode_key), ("value", encode_value)):
            if encode:
                i = table.schema.get_field_index(name)
                table = table.set_column(i, name, table.column(i).dictionary_encode())
        tables.append(table)
    one = concat_records(tables)
    rows = [row for rows, _, _ in pieces for row in rows]
    assert one.column("key").to_pylist() == [k for k, _ in rows]
    assert one.column("value").to_pylist() == [v for _, v in rows]
    read = records_of([f"t{i}" for i in range(len(tables))], list(range(len(tables))), tables)
    assert read.column("topic").to_pylist() == [
        f"t{i}" for i, (rows, _, _) in enumerate(pieces) for _ in rows]
