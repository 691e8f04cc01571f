"""Interactive queries on Spark: ``app.store(name)`` and ``kspark store query`` read the
latest committed state and equal the test driver's stores after the same input."""

from __future__ import annotations

import json
import os

import pytest
from query_topologies import COUNTS, DAY, EVENTS, SESSIONS, TOTALS, counter_topology, events
from query_topologies import driver_stores as run_driver
from typer.testing import CliRunner

from kspark import InvalidStateStoreError, io, serdes
from kspark.cli import app as cli
from kspark.spark import StreamsApp

pytestmark = [pytest.mark.spark]
RECORDS = events(240, seed=5)


@pytest.fixture(scope="module")
def counted(spark, tmp_path_factory):
    """Application A run on Spark (2 partitions, 2 micro-batches), stopped, and the driver's
    stores after the same input."""
    root = str(tmp_path_factory.mktemp("queries"))
    source = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    source.send_all(RECORDS, per_file=120)
    app = StreamsApp(counter_topology(), "counter", {EVENTS: source}, spark=spark,
                     checkpoint_dir=os.path.join(root, "counter"))
    app.start()
    try:
        app.process_all_available()
        running = {name: app.store(name).all() for name in (COUNTS, TOTALS, SESSIONS)}
    finally:
        app.stop()
    expected, _ = run_driver(counter_topology(), RECORDS)
    return app, expected, running


def test_running_and_stopped_queries_equal_the_driver_stores(counted):
    app, expected, running = counted
    assert len(expected[TOTALS]) == 6
    assert len(expected[COUNTS]) > 20 and len(expected[SESSIONS]) > 20
    assert running == expected
    for name in (COUNTS, TOTALS, SESSIONS):
        view = app.store(name)
        assert view.all() == expected[name], name
        assert view.batch_id == 1


def test_point_and_range_queries_equal_the_driver_stores(counted):
    app, expected, _ = counted
    totals = dict(expected[TOTALS])
    kv = app.store(TOTALS)
    assert {user: kv.get(user) for user in totals} == totals
    assert kv.get("nobody") is None
    assert kv.range("user-1", "user-3") == [e for e in expected[TOTALS] if "user-1" <= e.key
                                             <= "user-3"]
    ws = app.store(COUNTS)
    key = expected[COUNTS][0].key.key
    mine = [(e.key.window.start, e.value) for e in expected[COUNTS] if e.key.key == key]
    assert [(kv.key, kv.value) for kv in ws.fetch_range(key, 0, 30 * DAY)] == mine
    assert ws.fetch(key, mine[0][0]) == mine[0][1]
    assert ws.fetch_all(2 * DAY, 4 * DAY) == sorted(
        (e for e in expected[COUNTS] if 2 * DAY <= e.key.window.start <= 4 * DAY),
        key=lambda e: (e.key.window.start, e.key.key),
    )
    ss = app.store(SESSIONS)
    user = expected[SESSIONS][0].key.key
    assert ss.fetch(user) == sorted(
        (e for e in expected[SESSIONS] if e.key.key == user),
        key=lambda e: (e.key.window.end, e.key.window.start),
    )
    assert ss.find_sessions(user, 0, 30 * DAY) == ss.fetch(user)


def _run_counter(spark, name, source, checkpoint, config):
    """The counter topology run on Spark over what ``source`` holds, then stopped: the app, a
    reader of its state and its last committed batch."""
    from kspark.spark.internals.query import StateReader, latest_committed_batch, load_app_info

    app = StreamsApp(counter_topology(), name, {EVENTS: source}, spark=spark,
                     checkpoint_dir=checkpoint, config=config)
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    reader = StateReader(spark, checkpoint, load_app_info(checkpoint))
    return app, reader, latest_committed_batch(reader.query_dir, spark)


@pytest.mark.parametrize("limits", [(0, 1 << 20), (1 << 20, 1)], ids=["in", "out"])
def test_a_task_moves_its_buckets_between_its_value_and_the_map_state(spark, tmp_path, limits):
    """A task keeps its buckets in its task value while they are at most
    ``state.inline.max.bytes``, else one per entry of the MapState; restarted with another limit,
    its next micro-batch moves them (out at once; in when it has read them all), and the
    stores read as the driver's after the same input."""

    records = events(240, seed=7, users=40)
    source = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    checkpoint = str(tmp_path / "moving")

    def run(limit: int) -> dict[tuple[int, int], bool]:
        _, reader, batch = _run_counter(spark, "moving", source, checkpoint,
                                        {"state.buckets": 4, "state.inline.max.bytes": limit})
        assert batch is not None
        return {(op, task): inline is not None
                for op in range(2) for task, (_, inline) in reader.task_values(op, batch).items()}

    source.send_all(records[:120], per_file=120)
    first = run(limits[0])
    assert len(first) == 4 and set(first.values()) == {limits[0] > 0}, first
    source.send_all(records[120:], per_file=120)
    second = run(limits[1])
    assert set(second.values()) == {limits[1] > 1}, second
    expected, _ = run_driver(counter_topology(), records)
    app = StreamsApp(counter_topology(), "moving", {EVENTS: source}, spark=spark,
                     checkpoint_dir=checkpoint, config={"state.buckets": 4})
    for name in (COUNTS, TOTALS, SESSIONS):
        assert app.store(name).all() == expected[name], name


def test_a_task_whose_batch_changes_most_buckets_keeps_them_in_its_value_past_the_limit(
        spark, tmp_path):
    """A task whose micro-batch changed at least half of its buckets keeps them in its task
    value while they are at most 16 times ``state.inline.max.bytes`` (each would be written
    anyway); one whose micro-batch changed fewer moves them to the MapState; the stores read as
    the driver's."""
    from kspark.spark.internals.stage import CHANGED_INLINE_FACTOR

    records = events(240, seed=5, users=40)
    source = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    checkpoint = str(tmp_path / "changed")

    def run(limit: int) -> dict[tuple[int, int], int | None]:
        _, reader, batch = _run_counter(spark, "changed", source, checkpoint,
                                        {"state.buckets": 4, "state.inline.max.bytes": limit})
        assert batch is not None
        return {(op, task): None if inline is None else sum(map(len, inline.values()))
                for op in range(2) for task, (_, inline) in reader.task_values(op, batch).items()}

    source.send_all(records[:80], per_file=80)  # each task's records reach all its buckets
    first = run(1 << 20)
    assert len(first) == 4 and None not in first.values(), first
    smallest, largest = min(first.values()), max(first.values())
    limit = largest // 4  # under every task's size after the next micro-batch, and 16x over it
    assert smallest > limit
    source.send_all(records[80:160], per_file=80)
    second = run(limit)
    assert None not in second.values() and max(second.values()) <= CHANGED_INLINE_FACTOR * limit
    user = records[160][0]
    late = [r for r in records[160:] if r[0] == user]  # one user: a bucket or two of its tasks
    source.send_all(late, per_file=len(late))
    third = run(limit)
    moved = {task for task, size in third.items() if size is None}
    assert moved and all(third[task] == second[task] for task in third.keys() - moved), third
    expected, _ = run_driver(counter_topology(), records[:160] + late)
    app = StreamsApp(counter_topology(), "changed", {EVENTS: source}, spark=spark,
                     checkpoint_dir=checkpoint, config={"state.buckets": 4})
    for name in (COUNTS, TOTALS, SESSIONS):
        assert app.store(name).all() == expected[name], name


def test_a_large_task_value_is_stored_compressed_and_read_back(spark, tmp_path):
    """A task value holding its buckets is written compressed once it is long; the next
    micro-batch resumes from it, and the stores read as the driver's after the same input."""
    records = events(3000, seed=11, users=2000)
    source = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    source.send_all(records, per_file=1500)
    app, reader, batch = _run_counter(spark, "compressed", source, str(tmp_path / "compressed"),
                                      {"state.buckets": 4})
    assert batch == 1
    raw = [bytes(blob) for op in range(2)
           for (blob,) in reader.task_rows(op, batch).select("value.blob").collect()]
    assert len(raw) == 4 and all(value.startswith(b"KSPI\x02") for value in raw), \
        [value[:5] for value in raw]
    expected, _ = run_driver(counter_topology(), records)
    for name in (COUNTS, TOTALS, SESSIONS):
        assert app.store(name).all() == expected[name], name


def test_task_values_of_every_format_read_back():
    """A task value: the task state alone, with its buckets, or with its buckets compressed
    (long ones); each reads back as written."""
    from kspark.spark.internals.stage import COMPRESS_FROM, pack_task_value, unpack_task_value

    meta = b"\x80task-state"
    assert unpack_task_value(meta) == (meta, None)
    small = {("counts", 0): b"\x80" + b"a" * 10}
    assert pack_task_value(meta, small).startswith(b"KSPI\x01")
    assert unpack_task_value(pack_task_value(meta, small)) == (meta, small)
    large = {("counts", b): bytes(range(256)) * (COMPRESS_FROM // 512) for b in range(4)}
    packed = pack_task_value(meta, large)
    assert packed.startswith(b"KSPI\x02") and len(packed) < COMPRESS_FROM
    assert unpack_task_value(packed) == (meta, large)


def test_an_app_that_never_ran_has_empty_stores(spark, app_dir):
    app = StreamsApp(counter_topology(), "idle", {EVENTS: io.memory()}, spark=spark,
                     checkpoint_dir=os.path.join(app_dir, "never-started"))
    view = app.store(COUNTS)
    assert view.all() == [] and view.fetch("k", 0) is None and view.batch_id is None


def test_unknown_store_and_empty_time_range_are_errors(counted):
    app, _, _ = counted
    with pytest.raises(InvalidStateStoreError) as err:
        app.store("no-such-store")
    assert "no-such-store" in str(err.value)
    for name in (COUNTS, TOTALS, SESSIONS):
        assert name in str(err.value)
    with pytest.raises(ValueError, match=r"from \(5\) is after to \(1\)"):
        app.store(COUNTS).fetch_all(5, 1)


def test_cli_store_query_prints_json_and_tables(counted):
    app, expected, _ = counted
    runner = CliRunner()
    args = ["store", "query", "--app-dir", app.checkpoint_dir]
    result = runner.invoke(cli, [*args, "--store", TOTALS, "--json"])
    assert result.exit_code == 0, result.output
    assert {row["key"]: row["value"] for row in json.loads(result.output)} == dict(
        expected[TOTALS])

    key = expected[COUNTS][0].key.key
    result = runner.invoke(cli, [*args, "--store", COUNTS, "--key", key, "--from", "0",
                                 "--to", "1970-01-31T00:00:00", "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["key"], r["start"], r["end"], r["value"]) for r in json.loads(result.output)] == [
        (e.key.key, e.key.window.start, e.key.window.end, e.value)
        for e in expected[COUNTS] if e.key.key == key
    ]
    result = runner.invoke(cli, [*args, "--store", SESSIONS])
    assert result.exit_code == 0, result.output
    assert f"{len(expected[SESSIONS])} entries" in result.output

    result = runner.invoke(cli, [*args, "--store", "nope"])
    assert result.exit_code == 2
    assert "no store 'nope'" in result.output and COUNTS in result.output
    result = runner.invoke(cli, [*args, "--store", COUNTS, "--from", "9", "--to", "3"])
    assert result.exit_code == 2
    assert "is after" in result.output

    result = runner.invoke(cli, ["store", "list", "--app-dir", app.checkpoint_dir])
    assert result.exit_code == 0 and "counter-event-counts-changelog" in result.output
