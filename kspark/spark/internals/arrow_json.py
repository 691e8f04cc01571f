"""Rows of an Arrow table as JSON text, in columns: what ``json.dumps(row, default=str)`` writes
for each row that ``table.to_pylist()`` gives, built per column instead of per row (the file
source's whole-row values, :func:`~kspark.spark.internals.file_batches.parquet_batch`)."""

from __future__ import annotations

import json
from typing import Any

#: a string that ``json.dumps`` writes as it is between quotes: printable ASCII but ``"`` and ``\``
_PLAIN_TEXT = r"^[\x20\x21\x23-\x5b\x5d-\x7e]*$"


def json_rows(table: Any) -> Any | None:
    """Each row of ``table`` as ``json.dumps(row, default=str)`` (an Arrow string array), or
    ``None`` when a column is of a type this does not write (nested, temporal, decimal,
    binary) or two columns share a name."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = table.column_names
    if len(set(names)) != len(names):
        return None
    if not names:
        return pa.array(["{}"] * table.num_rows, pa.string())
    pieces: list[Any] = []
    for i, (name, column) in enumerate(zip(names, table.columns, strict=True)):
        text = _column_json(column.combine_chunks())
        if text is None:
            return None
        pieces.append(("{" if i == 0 else ", ") + json.dumps(name) + ": ")
        pieces.append(text)
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, "")


def _column_json(column: Any) -> Any | None:
    """A column's values as JSON text (``null`` for nulls), or ``None``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_null(kind):
        return pa.array(["null"] * len(column), pa.string())
    if pa.types.is_integer(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        column = column.cast(pa.string())
        if pc.all(pc.match_substring_regex(column, _PLAIN_TEXT)).as_py() is not False:
            text = pc.binary_join_element_wise('"', column, '"', "")
        else:
            text = _each_distinct(column)
    elif pa.types.is_float32(kind) or pa.types.is_float64(kind):
        text = _each_distinct(column)
    else:
        return None
    return pc.fill_null(text.cast(pa.string()), "null")


def _each_distinct(column: Any) -> Any:
    """``json.dumps`` of each distinct value of ``column``, taken for each row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    uniques = [json.dumps(v) for v in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(uniques, pa.string()), encoded.indices)
