"""How the file source cuts a micro-batch into read tasks (:func:`plan_reads`): every row of every
file is read exactly once and in order, row groups are kept whole unless cores would idle, and
small row groups share a task; the tasks of a real Parquet file give exactly the file's records.
Read in the stage's tasks instead (file rows), each task gets exactly the records the shuffle
brought it before, and a Spark task reads each range once."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.spark.internals import file_batches, file_ranges
from kspark.spark.internals.file_source import PARQUET_SPLIT_ROWS, FileStreamReader, plan_reads
from kspark.spark.internals.row_schema import ROW_COLUMNS
from kspark.spark.internals.stage import StageProcessor
from kspark.spark.internals.stage_rows import RECORD_FIELDS, record_columns
from kspark.spark.internals.wire import KIND_FILE

row_groups = st.lists(st.integers(1, 400_000), min_size=1, max_size=6)
files = st.lists(st.one_of(st.none(), row_groups), min_size=1, max_size=5)


def _ranges(plan, index, total):
    """The ``(lo, hi)`` row ranges that ``plan`` reads of file ``index`` (``hi`` resolved)."""
    return [(lo, total if hi is None else hi) for i, lo, hi in plan if i == index]


@settings(max_examples=300, deadline=None)
@given(files=files, parallelism=st.integers(1, 8))
def test_every_row_is_read_once_in_order(files, parallelism):
    listed = [(10 + n, groups) for n, groups in enumerate(files)]
    plan = plan_reads(listed, parallelism)
    assert plan == sorted(plan, key=lambda t: (t[0], t[1]))
    for index, groups in listed:
        if groups is None:
            assert [t for t in plan if t[0] == index] == [(index, 0, None)]
            continue
        total = sum(groups)
        ranges = _ranges(plan, index, total)
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert all(lo < hi for lo, hi in ranges)
        # the last task reads to the end of the file, so that a whole file is read unsliced
        assert [t for t in plan if t[0] == index][-1][2] is None


@settings(max_examples=300, deadline=None)
@given(files=files, parallelism=st.integers(1, 8))
def test_row_groups_are_cut_only_for_idle_cores(files, parallelism):
    listed = list(enumerate(files))
    plan = plan_reads(listed, parallelism)
    cuts_inside_groups = 0
    for index, groups in listed:
        if groups is None:
            continue
        bounds = set(np.cumsum([0, *groups]).tolist())
        for lo, _ in _ranges(plan, index, sum(groups)):
            cuts_inside_groups += lo not in bounds
    if cuts_inside_groups:
        # cutting stops as soon as every core has a task
        assert len(plan) <= parallelism
    if len(plan) < parallelism:
        # nothing large enough to cut is left
        for index, groups in listed:
            if groups is not None:
                assert all(
                    hi - lo <= PARQUET_SPLIT_ROWS for lo, hi in _ranges(plan, index, sum(groups))
                )


@pytest.mark.parametrize(
    "files, parallelism, expected",
    [
        # two row groups of a 2 M-row file on two cores: one task each, none decoded twice
        ([(0, [1_048_576, 951_424])], 2, [(0, 0, 1_048_576), (0, 1_048_576, None)]),
        # one row group on two cores: cut in two
        ([(3, [200_000])], 2, [(3, 0, 100_000), (3, 100_000, None)]),
        # as many files as cores or more: whole files
        ([(i, [200_000]) for i in range(4)], 2, [(i, 0, None) for i in range(4)]),
        # small row groups share a task, up to the batch's rows per core
        ([(0, [10_000] * 100)], 2, [(0, 0, 500_000), (0, 500_000, None)]),
        # small files are not cut
        ([(0, [5_000]), (1, None)], 4, [(0, 0, None), (1, 0, None)]),
    ],
)
def test_plans(files, parallelism, expected):
    assert plan_reads(files, parallelism) == expected


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7])
def test_read_tasks_give_the_files_records(tmp_path, parallelism):
    rng = np.random.default_rng(7)
    n = 260_000
    table = pa.table(
        {
            "key": [f"k{i}" for i in rng.integers(0, 500, n)],
            "ts": np.arange(n, dtype=np.int64),
            "value": [f"v{i}" for i in range(n)],
        }
    )
    os.makedirs(tmp_path / "in")
    pq.write_table(table, tmp_path / "in" / "a.parquet", row_group_size=70_000)
    pq.write_table(table.slice(0, 1000), tmp_path / "in" / "b.parquet")
    options = {
        "path": str(tmp_path / "in"),
        "format": "parquet",
        "key_field": "key",
        "value_field": "value",
        "timestamp_field": "ts",
        "partitions": "3",
        "topic": "t",
        "pack": "false",
    }

    def read(parallelism: int) -> tuple[int, pa.Table]:
        reader = FileStreamReader({**options, "parallelism": str(parallelism)})
        parts = reader.partitions({"files": 0}, reader.latestOffset({"files": 0}, None))
        return len(parts), pa.Table.from_batches([reader._read_batch(p) for p in parts])

    tasks, table_read = read(parallelism)
    assert tasks >= min(parallelism, 2)
    one_task_per_file, whole = read(1)
    assert one_task_per_file == 2
    assert table_read.equals(whole)
    assert table_read.num_rows == n + 1000
    assert table_read.column("key").to_pylist()[:n] == [
        k.encode() for k in table.column("key").to_pylist()
    ]
    assert table_read.column("offset").to_pylist()[n:] == list(range(1 << 32, (1 << 32) + 1000))


KEY_COLUMNS = st.one_of(
    st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=60),
    st.lists(st.one_of(st.none(), st.integers(-(10**6), 10**6)), min_size=1, max_size=60),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(keys=KEY_COLUMNS, text_values=st.booleans(), partitions=st.integers(1, 7))
def test_parquet_columns_read_as_the_row_reader_reads_them(
    tmp_path_factory, keys, text_values, partitions
):
    """The Parquet reader's columns (each distinct key encoded and partitioned once, a string
    key's bytes taken from Arrow) equal the row-by-row reader's records."""
    from kspark.io.files import file_rows
    from kspark.spark.internals.file_batches import parquet_batch

    path = tmp_path_factory.mktemp("keys") / "a.parquet"
    n = len(keys)
    pq.write_table(pa.table({"key": keys, "ts": np.arange(n, dtype=np.int64),
                             "value": [f"v{i % 3}" if text_values else i % 3
                                       for i in range(n)]}), path)
    batch = parquet_batch(str(path), 0, None, "key", "value", "ts", partitions, "t", 0)
    expected = file_rows(str(path), "parquet", "key", "value", "ts", partitions)
    got = (batch.column("key").to_pylist(), batch.column("value").to_pylist(),
           batch.column("timestamp").to_pylist(), batch.column("partition").to_pylist())
    assert got == tuple(expected)


# -- reading in the stage's tasks ---------------------------------------------------------------
def _write_inputs(root) -> dict[str, str]:
    """A directory with a Parquet file of several row groups (and ``root/jsonl`` with two
    JSON-lines files); the source options of a topic of 3 partitions over it."""
    rng = np.random.default_rng(11)
    n = 30_000
    table = pa.table(
        {
            "key": [None if i % 97 == 0 else f"u{k}" for i, k in enumerate(rng.integers(0, 50, n))],
            "ts": rng.integers(0, 10**6, n).astype(np.int64),
            "value": [f"click {i}" for i in range(n)],
        }
    )
    os.makedirs(root / "parquet")
    pq.write_table(table, root / "parquet" / "a.parquet", row_group_size=8_000)
    os.makedirs(root / "jsonl")
    for name in ("a", "b"):
        with open(root / "jsonl" / f"{name}.jsonl", "w") as f:
            for i in range(500):
                f.write(json.dumps({"key": f"u{i % 7}", "ts": i, "value": {"n": i}}) + "\n")
    return {
        "path": str(root / "parquet"),
        "format": "parquet",
        "key_field": "key",
        "value_field": "value",
        "timestamp_field": "ts",
        "partitions": "3",
        "topic": "clicks",
    }


def _frame(batches) -> pd.DataFrame:
    return pa.Table.from_batches(batches).to_pandas()[ROW_COLUMNS]


def _by_partition(columns) -> dict[int, pd.DataFrame]:
    frame = pd.DataFrame({name: columns[name] for name in RECORD_FIELDS})
    frame = frame.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)
    return {int(p): g.reset_index(drop=True) for p, g in frame.groupby("partition")}


@pytest.mark.parametrize("parallelism", [1, 4])
@pytest.mark.parametrize("whole_rows", [False, True])
def test_tasks_reading_file_ranges_get_the_records_the_shuffle_brought(tmp_path, parallelism,
                                                                       whole_rows):
    # whole rows as values: a Spark task writes the JSON of its own partitions' rows only
    options = _write_inputs(tmp_path)
    if whole_rows:
        del options["value_field"]
    for fmt in ("parquet", "jsonl"):
        path = str(tmp_path / fmt)
        opts = {**options, "format": fmt, "path": path, "parallelism": str(parallelism)}
        shuffled = FileStreamReader(opts)
        in_stage = FileStreamReader({**opts, "read_in_stage": "true"})
        end = shuffled.latestOffset({"files": 0}, None)
        packed = [b for p in shuffled.partitions({"files": 0}, end) for b in shuffled.read(p)]
        file_rows = [b for p in in_stage.partitions({"files": 0}, end) for b in in_stage.read(p)]
        assert all(k == KIND_FILE for b in file_rows for k in b["kind"].to_pylist())
        # one read task, one row per partition and file: no record crosses the shuffle
        assert len(in_stage.partitions({"files": 0}, end)) == 1
        assert sum(b.num_rows for b in file_rows) == 3 * end["files"]
        stage = StageProcessor(b"", 0, None, {"clicks": 3})
        frame = _frame(file_rows)
        expected = _by_partition(record_columns(_frame(packed)))
        assert sorted(expected) == [0, 1, 2]
        for p, records in expected.items():
            # each task gets the rows of its partition, as the stage hands them over
            mine = frame[frame["partition"] == p]
            got = _by_partition(record_columns(mine, stage.file_records))
            assert list(got) == [p]
            pd.testing.assert_frame_equal(got[p], records)
        stage.close()


def test_a_range_is_read_once_per_spark_task(tmp_path, monkeypatch):
    options = _write_inputs(tmp_path)
    reader = FileStreamReader({**options, "read_in_stage": "true", "partitions": "5"})
    part = reader.partitions({"files": 0}, {"files": 1})[0]
    row = next(reader.read(part))
    blob = row["key"][0].as_py()
    reads = []
    real = file_ranges.read_file_range
    monkeypatch.setattr(file_ranges, "read_file_range", lambda b: reads.append(b) or real(b))
    stage = StageProcessor(b"", 0, None, {"clicks": 5})
    taken = [stage.file_records(blob, p) for p in range(5)]
    assert len(reads) == 1
    assert sum(t.num_rows for t in taken if t is not None) == 30_000
    # a partition asked again (or one without records) gets nothing, without reading again
    assert stage.file_records(blob, 0) is None and len(reads) == 1
    stage.close()
    assert stage.file_records(blob, 0) is not None and len(reads) == 2


def test_the_range_reader_makes_the_range_rows_of_each_batchs_files(tmp_path):
    """The simple reader Spark calls on the driver: each micro-batch's files (at most
    ``max_files_per_trigger``), as the rows the in-stage reader gives; a replay of the same
    offsets gives the same rows; no new file, no rows and the same offset."""
    from kspark.spark.internals.file_source import FileRangeReader

    options = {**_write_inputs(tmp_path), "path": str(tmp_path / "jsonl"), "format": "jsonl",
               "max_files_per_trigger": "1"}
    reader = FileRangeReader(options)
    in_stage = FileStreamReader({**options, "read_in_stage": "true"})
    start = reader.initialOffset()
    seen = []
    for expected_end in ({"files": 1}, {"files": 2}):
        rows, end = reader.read(start)
        rows = list(rows)
        assert end == expected_end
        (part,) = in_stage.partitions(start, end)
        assert [r.to_pylist() for r in rows] == [r.to_pylist() for r in in_stage.read(part)]
        assert [r.to_pylist() for r in reader.readBetweenOffsets(start, end)] == [
            r.to_pylist() for r in rows]
        seen += [k for r in rows for k in r.column("key").to_pylist()]
        start = end
    rows, end = reader.read(start)
    assert end == start and list(rows) == []
    assert len(seen) == 2 * 3  # a row per file and partition


def test_file_rows_without_a_reader_are_refused(tmp_path):
    options = _write_inputs(tmp_path)
    reader = FileStreamReader({**options, "read_in_stage": "true"})
    rows = next(reader.read(reader.partitions({"files": 0}, {"files": 1})[0]))
    with pytest.raises(ValueError, match="file rows need a file reader"):
        record_columns(_frame([rows]))


def test_an_empty_file_range_gives_no_records():
    import pyarrow as pa

    from kspark.spark.internals.file_ranges import FileRangeRecords
    from kspark.spark.internals.wire import INPUT_ARROW

    records = FileRangeRecords(pa.RecordBatch.from_pylist([], schema=INPUT_ARROW))
    assert records.pop(0) is None and records.pop(1, "none") == "none"


def _kspark_file(path, records) -> None:
    """A file in kspark's own format, as its sinks write it (text or base64 keys and values)."""
    from kspark.io.files import FileTopic

    FileTopic(str(path.parent), format="kspark", partitions=3).write_batch(0, records)
    os.replace(path.parent / "batch-000000000000.jsonl", path)


def test_kspark_files_are_read_by_arrow_as_by_the_row_reader(tmp_path):
    """A file kspark's sinks wrote is parsed by Arrow's JSON reader: the same keys (text and
    binary), values (and tombstones), timestamps, partitions and offsets as the row reader."""
    from kspark.io.files import file_rows

    rng = np.random.default_rng(3)
    records = [(None if i % 11 == 0 else (f"k{i}".encode() if i % 2 else bytes([255, i % 256])),
                None if i % 13 == 0 else f"v{i}".encode() if i % 3 else b"\x00\xff" + bytes(i % 7),
                int(rng.integers(0, 10**12)), int(i % 3)) for i in range(3000)]
    os.makedirs(tmp_path / "in")
    _kspark_file(tmp_path / "in" / "a.jsonl", records)
    batch = file_batches.kspark_batch(str(tmp_path / "in" / "a.jsonl"), 0, None, 3, "t", 5 << 32)
    assert batch is not None
    keys, values, stamps, parts = file_rows(str(tmp_path / "in" / "a.jsonl"), "kspark", "key",
                                            None, "timestamp", 3)
    assert batch.column("key").to_pylist() == keys == [r[0] for r in records]
    assert batch.column("value").to_pylist() == values == [r[1] for r in records]
    assert batch.column("timestamp").to_pylist() == stamps
    assert batch.column("partition").to_pylist() == parts
    assert batch.column("offset").to_pylist() == list(range(5 << 32, (5 << 32) + 3000))


def test_a_kspark_file_the_arrow_reader_cannot_take_goes_to_the_row_reader(tmp_path):
    """A malformed line or a partition out of range: the row reader reports it with its line."""
    os.makedirs(tmp_path / "in")
    path = tmp_path / "in" / "a.jsonl"
    _kspark_file(path, [(b"k", b"v", 1, 2)])
    assert file_batches.kspark_batch(str(path), 0, None, 2, "t", 0) is None  # 2 of 2 partitions
    with open(path, "a") as f:
        f.write("{not json\n")
    assert file_batches.kspark_batch(str(path), 0, None, 3, "t", 0) is None
