"""A task's changelog entries as columns (``kspark.runtime.changelog_entries``): what the
driver and the Spark stage take from a task, and what tests compare between its paths."""

from __future__ import annotations

from kspark import StreamsBuilder, serdes
from kspark.runtime.changelog_entries import ChangelogEntries
from kspark.testing import TopologyTestDriver


def _entries(*rows: tuple[object, object, int]) -> ChangelogEntries:
    out = ChangelogEntries()
    for key, value, ts in rows:
        out.append(key, value, ts)
    return out


def test_entries_keep_their_order_and_compare_by_every_column() -> None:
    entries = _entries(("a", 1, 5), ("b", None, 6), ("a", 2, 7))
    assert entries.rows() == [("a", 1, 5), ("b", None, 6), ("a", 2, 7)]
    assert entries.keys == ["a", "b", "a"] and entries.timestamps == [5, 6, 7]
    assert len(entries) == 3
    assert entries == _entries(("a", 1, 5), ("b", None, 6), ("a", 2, 7))
    # one field of one entry differs, or an entry is missing: not equal
    assert entries != _entries(("a", 1, 5), ("b", None, 6), ("a", 2, 8))
    assert entries != _entries(("a", 1, 5), ("b", 0, 6), ("a", 2, 7))
    assert entries != _entries(("a", 1, 5), ("c", None, 6), ("a", 2, 7))
    assert entries != _entries(("a", 1, 5), ("b", None, 6))
    assert entries != entries.rows()  # not equal to anything else
    assert "('b', None, 6)" in repr(entries)


def test_a_task_logs_each_change_of_its_stores_in_order() -> None:
    builder = StreamsBuilder()
    builder.stream("in", serdes.String(), serdes.Long()).group_by_key().count()
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("in", serdes.String(), serdes.Long())
        task = driver.tasks[0]
        for i, key in enumerate(["x", "y", "x"]):
            pipe.pipe_input(key, 0, 10 + i)
        [(store, entries)] = task.drain_changelog().items()
        # what the driver had not taken yet (it takes them every 64 records): each count
        assert entries.rows() == [("x", 1, 10), ("y", 1, 11), ("x", 2, 12)]
        assert task.drain_changelog() == {}
        assert store in driver.topology.store_builders
