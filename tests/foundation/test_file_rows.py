"""Reading file topics row by row (kspark.io.files.file_rows): every row becomes a record or an
error naming the file, line, field and value; nothing is dropped silently."""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import io, serdes
from kspark.errors import BadInputError
from kspark.io.files import INVALID_TIMESTAMP, file_rows
from kspark.io.record_files import read_record_file


def _jsonl(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_a_kspark_file_with_more_partitions_than_the_topic_declares_is_refused(tmp_path):
    topic = io.memory(serdes.String(), serdes.String(), partitions=2)
    topic.send_all([(f"k{i}", "v", i) for i in range(20)])
    data = topic.path
    name = sorted(os.listdir(data))[0]
    keys, *_ = file_rows(os.path.join(data, name), "kspark", "key", None, "timestamp", 2)
    assert len(keys) == 20
    with pytest.raises(BadInputError, match=r"line \d+: a record of partition 1, but the file "
                                            r"topic has 1 partition\(s\)"):
        file_rows(os.path.join(data, name), "kspark", "key", None, "timestamp", 1)


def test_a_memory_topics_file_appears_once_under_its_final_name(monkeypatch):
    # a source polling while records are flushed lists each file whole, under the one name it
    # keeps (a file listed under a name it then loses cannot be read)
    from kspark.io.files import list_data_files

    topic = io.memory(serdes.String(), serdes.String(), partitions=2)
    listings = []
    replace = os.replace

    def watched(src, dst):
        replace(src, dst)
        listings.append(list_data_files(topic.path))

    monkeypatch.setattr(os, "replace", watched)
    topic.send_all([(f"k{i}", "v", i) for i in range(20)], per_file=7)
    final = list_data_files(topic.path)
    assert final == [f"in-{i:012d}.jsonl" for i in range(3)]
    assert listings == [final[:1], final[:2], final]


@pytest.mark.parametrize("row, problem", [
    ({"user": "u", "ts": "soon"}, "timestamp field 'ts' is not a whole number: 'soon'"),
    ({"user": "u"}, "no timestamp field 'ts' (fields: 'user')"),
    ({"user": "u", "ts": None}, "timestamp field 'ts' is null"),
    ({"user": "u", "ts": 1.5}, "timestamp field 'ts' is not a whole number: 1.5"),
    ({"user": "u", "ts": [1]}, "timestamp field 'ts' is not a whole number: [1]"),
    ([1, 2], "not a JSON object: [1, 2]"),
])
def test_a_row_without_a_usable_timestamp_names_file_line_field_and_value(tmp_path, row,
                                                                           problem):
    path = _jsonl(tmp_path / "a.jsonl", [{"user": "u", "ts": 1}, row])
    with pytest.raises(BadInputError) as caught:
        file_rows(path, "jsonl", "user", None, "ts", 1)
    assert str(caught.value) == f"source file {path} line 2: {problem}"


def test_with_skip_invalid_the_row_becomes_a_record_the_task_skips(tmp_path):
    path = _jsonl(tmp_path / "a.jsonl", [{"user": "u", "ts": 1}, {"user": "v", "ts": "soon"},
                                          {"user": "w", "ts": "3"}])
    keys, values, stamps, _ = file_rows(path, "jsonl", "user", None, "ts", 1, skip_invalid=True)
    assert keys == [b"u", b"v", b"w"] and stamps == [1, INVALID_TIMESTAMP, 3]
    assert json.loads(values[1]) == {"user": "v", "ts": "soon"}  # the whole row, for dead letters


_BYTES = st.one_of(st.none(), st.binary(max_size=24), st.text(max_size=12).map(str.encode))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_BYTES, _BYTES, st.integers(0, 2**62), st.integers(0, 2)),
                min_size=1, max_size=30))
def test_kspark_files_are_read_in_columns_exactly_as_written(records):
    """Keys and values as UTF-8 text or Base64 (any bytes, None), timestamps and partitions:
    the Arrow reader gives back what the writer wrote, and so does ``file_rows``."""
    with tempfile.TemporaryDirectory() as root:
        topic = io.files(root, format="kspark", partitions=3)
        topic.write_batch(0, records)
        path = os.path.join(root, sorted(os.listdir(root))[0])
        expected = tuple(list(column) for column in zip(*records))
        assert read_record_file(path, 3) == expected
        assert file_rows(path, "kspark", "key", None, "timestamp", 3) == expected


def test_a_kspark_file_arrow_cannot_read_is_read_line_by_line(tmp_path):
    """A timestamp given as a whole float or as text: Arrow's reader declines the file, the
    line-by-line reader takes it (as it did before Arrow read these files)."""
    path = _jsonl(tmp_path / "b.jsonl", [
        {"key": "a", "value": "x", "timestamp": 5.0, "partition": 0},
        {"key": "b", "value_b64": "AAE=", "timestamp": "7", "partition": 0},
    ])
    assert read_record_file(path, 1) is None
    assert file_rows(path, "kspark", "key", None, "timestamp", 1) == (
        [b"a", b"b"], [b"x", b"\x00\x01"], [5, 7], [0, 0])
