"""Whole rows as JSON in columns (``kspark.spark.internals.arrow_json``): exactly the text the
row-by-row file reader writes, ``json.dumps(row, default=str)``, for every column type it takes;
``None`` for the rest."""

from __future__ import annotations

import json
import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.spark.internals.arrow_json import json_rows

TYPES = {
    "int64": (pa.int64(), st.integers(-(1 << 63), (1 << 63) - 1)),
    "uint64": (pa.uint64(), st.integers(0, (1 << 64) - 1)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "bool": (pa.bool_(), st.booleans()),
    "float64": (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    "float32": (pa.float32(), st.floats(width=32)),
    "string": (pa.string(), st.text()),
    "ascii": (pa.string(), st.text(st.characters(min_codepoint=32, max_codepoint=126))),
    "large_string": (pa.large_string(), st.text(max_size=5)),
}


def _row_by_row(table: pa.Table) -> list[str]:
    return [json.dumps(row, default=str) for row in table.to_pylist()]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_rows_are_written_as_json_dumps_writes_them(data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=0, max_size=4))
    n = data.draw(st.integers(0, 12))
    columns = {}
    for i, kind in enumerate(kinds):
        arrow_type, values = TYPES[kind]
        column = data.draw(st.lists(st.none() | values, min_size=n, max_size=n))
        name = data.draw(st.sampled_from([f"c{i}", f'q"{i}', f"ü{i}", f"nl\n{i}"]))
        columns[name] = pa.array(column, arrow_type)
    if len(columns) < len(kinds):
        return  # two columns drew one name
    table = pa.table({"_": pa.nulls(n), **columns}).drop_columns(["_"])  # n rows, 0 columns too
    got = json_rows(table)
    assert got is not None
    expected = _row_by_row(table)
    assert got.to_pylist() == expected
    # and the text reads back as the rows (NaN aside, not equal to itself)
    for text, row in zip(got.to_pylist(), table.to_pylist(), strict=True):
        back = json.loads(text)
        assert list(back) == list(row)
        assert all(v == row[k] or (isinstance(v, float) and math.isnan(v))
                   for k, v in back.items())


def test_a_null_column_and_chunked_columns():
    table = pa.Table.from_batches([
        pa.record_batch({"a": pa.array([1, None]), "n": pa.nulls(2)}),
        pa.record_batch({"a": pa.array([3, 4]), "n": pa.nulls(2)}),
    ])
    assert json_rows(table).to_pylist() == _row_by_row(table)


def test_types_it_does_not_write_are_left_to_the_row_reader():
    for column in (pa.array([[1]]), pa.array([{"x": 1}]), pa.array([b"b"]),
                   pa.array([1], pa.timestamp("ms"))):
        assert json_rows(pa.table({"c": column})) is None, column.type
    same_name = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    assert json_rows(same_name) is None
