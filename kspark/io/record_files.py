"""Reading a file of kspark records (format ``kspark``: JSON lines with ``key`` or ``key_b64``,
``value`` or ``value_b64``, ``timestamp`` and ``partition``) in columns with Arrow's JSON reader.

A file that Arrow cannot read as such (a malformed line, a timestamp that is not a whole
number, a partition out of range, ...) gives ``None``: the line-by-line reader of
:func:`kspark.io.files.file_rows` then reads it and reports the line and field at fault.
"""

from __future__ import annotations

import binascii
from typing import Any

#: the columns of a kspark record file (``*_b64``: bytes that are not UTF-8 text, in Base64)
_FIELDS = (("key", "string"), ("key_b64", "string"), ("value", "string"),
           ("value_b64", "string"), ("timestamp", "int64"), ("partition", "int64"))


#: key bytes, value bytes, timestamps and partitions of a file's records
Columns = tuple[list[bytes | None], list[bytes | None], list[int], list[int]]


def read_record_file(path: str, partitions: int) -> Columns | None:
    """The key bytes, value bytes, timestamps and partitions of the records of ``path`` (a
    topic of ``partitions`` partitions), or ``None`` when Arrow cannot read them as such."""
    table = read_record_table(path, partitions)
    if table is None:
        return None
    return tuple(table.column(name).to_pylist()
                 for name in ("key", "value", "timestamp", "partition"))


def read_record_table(path: str, partitions: int) -> Any | None:
    """:func:`read_record_file` as an Arrow table (columns ``key`` and ``value`` binary,
    ``timestamp`` and ``partition`` int64), without a Python object per record where no
    bytes come in Base64."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in _FIELDS])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(path, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    stamps, parts = table.column("timestamp"), table.column("partition")
    if stamps.null_count or parts.null_count:
        return None
    if table.num_rows:
        low, high = pc.min_max(parts).values()
        if low.as_py() < 0 or high.as_py() >= partitions:
            return None
    try:
        keys, values = _bytes(table, "key"), _bytes(table, "value")
    except binascii.Error:
        return None
    return pa.table({"key": keys, "value": values, "timestamp": stamps, "partition": parts})


def _bytes(table: Any, name: str) -> Any:
    """Column ``name`` as bytes: its UTF-8 text, or the decoded ``<name>_b64`` where given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = table.column(name).cast(pa.binary()).combine_chunks()
    encoded = table.column(f"{name}_b64").combine_chunks()
    if encoded.null_count == len(encoded):
        return text
    decoded = pa.array(
        [None if t is None else binascii.a2b_base64(t) for t in encoded.to_pylist()], pa.binary()
    )
    return pc.if_else(encoded.is_valid(), decoded, text)
