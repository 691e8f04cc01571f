"""KTable: tables from topics and streams, filter / map_values with old values, to_stream."""

from __future__ import annotations

import pytest
from dsl_util import record_from

from kspark import serdes
from kspark.dsl import Materialized, StreamsBuilder
from kspark.records import Change
from kspark.testing import TopologyTestDriver

S = serdes.String()
L = serdes.Long()
CACHING = pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])


@CACHING
def test_table_from_topic_with_tombstones(caching):
    builder = StreamsBuilder()
    table = builder.table("in", S, L, materialized=Materialized("t", caching=caching))
    changes = record_from(builder, table)
    table.to_stream().to("out", S, L)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        inp.pipe_input("a", 1, 10)
        inp.pipe_input("b", 2, 11)
        inp.pipe_input("a", 3, 12)
        inp.pipe_input("a", None, 13)   # tombstone: delete a
        # a tombstone of an absent key: without a cache forwarded all the same (as Kafka
        # Streams' table source does), with one dropped (a key absent before and after)
        inp.pipe_input("c", None, 14)
        out = driver.create_output_topic("out", S, L)
        absent = [] if caching else [("c", None, 14)]
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", 1, 10), ("b", 2, 11), ("a", 3, 12), ("a", None, 13), *absent]
        assert driver.get_key_value_store("t").all() == [("b", 2)]
    absent_change = [] if caching else [Change(None, None)]
    assert [c for _, c, _ in changes] == [Change(1, None), Change(2, None), Change(3, 1),
                                          Change(None, 3), *absent_change]


def test_table_source_drops_and_counts_null_keys():
    builder = StreamsBuilder()
    builder.table("in", S, L, materialized="t")
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, L).pipe_input(None, 1, 1)
        assert driver.metrics()["dropped-records-null-key"] == 1
        assert driver.get_key_value_store("t").all() == []


@pytest.mark.parametrize(("caching", "expected"), [
    (True, []),                                  # created and deleted within one commit
    (False, [("k", "v"), ("k", None)]),
])
def test_stream_to_table_upserts_and_deletes(caching, expected):
    builder = StreamsBuilder()
    (builder.stream("in", S, S).flat_map_values(lambda v: [v, None])
     .to_table(Materialized("t", caching=caching)).to_stream().to("out", S, S))
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == expected
        assert driver.get_key_value_store("t").all() == []


def test_stream_to_table_after_rekey_and_null_keys():
    builder = StreamsBuilder()
    (builder.stream("in", S, S).select_key(lambda k, v: v or None).to_table("t")
     .to_stream().to("out", S, S))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "x", 1)
        inp.pipe_input("k", "", 2)     # null key after select_key: dropped, counted
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("x", "x")]
        assert driver.metrics()["dropped-records-total"] == 1
        assert driver.get_key_value_store("t").get("x") == "x"


def _table_changes(op, updates, caching=False):
    """Apply ``op`` to a table of ``in`` and return the changes it forwards."""
    builder = StreamsBuilder()
    table = builder.table("in", S, L, materialized=Materialized("src", caching=caching))
    result = op(table)
    changes = record_from(builder, result)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        for key, value in updates:
            inp.pipe_input(key, value, 1)
    return [(k, c) for k, c, _ in changes]


UPDATES = [("a", 10), ("a", 3), ("a", 2), ("a", 7), ("a", None), ("b", 1), ("b", None)]


@CACHING
def test_filter_turns_failing_updates_into_deletes(caching):
    changes = _table_changes(lambda t: t.filter(lambda k, v: v > 5), UPDATES, caching)
    assert changes == [
        ("a", Change(10, None)),   # passes
        ("a", Change(None, 10)),   # 3 fails, old passed: delete
        # 2 fails and old (3) failed: nothing
        ("a", Change(7, None)),    # passes, old failed
        ("a", Change(None, 7)),    # deleted upstream
        # b: 1 fails, then its delete: neither passes, nothing
    ]


def test_filter_not_is_the_complement():
    changes = _table_changes(lambda t: t.filter_not(lambda k, v: v > 5), UPDATES)
    assert changes == [
        ("a", Change(3, None)),
        ("a", Change(2, 3)),
        ("a", Change(None, 2)),
        ("b", Change(1, None)),
        ("b", Change(None, 1)),
    ]


def test_map_values_maps_new_and_old_values_and_never_none():
    calls = []

    def double(v):
        calls.append(v)
        return v * 2

    changes = _table_changes(lambda t: t.map_values(double), [("a", 1), ("a", 2), ("a", None)])
    assert changes == [("a", Change(2, None)), ("a", Change(4, 2)), ("a", Change(None, 4))]
    assert None not in calls


def test_materialized_filter_keeps_only_passing_rows():
    builder = StreamsBuilder()
    table = builder.table("in", S, L)
    filtered = table.filter(lambda k, v: v > 5, materialized="big")
    mapped = table.map_values(lambda v: -v, materialized=Materialized("neg", caching=False))
    filtered.to_stream().to("out", S, L)
    assert filtered.queryable_store_name == "big"
    assert mapped.queryable_store_name == "neg"
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        for key, value in [("a", 10), ("b", 1), ("c", 9), ("c", 2)]:
            inp.pipe_input(key, value, 1)
        assert driver.get_key_value_store("big").all() == [("a", 10)]
        assert driver.get_key_value_store("neg").all() == [("a", -10), ("b", -1), ("c", -2)]
        out = driver.create_output_topic("out", S, L).read_key_values_to_list()
        assert out == [("a", 10), ("c", 9), ("c", None)]


def test_to_stream_emits_new_values_only():
    builder = StreamsBuilder()
    builder.table("in", S, L).map_values(lambda v: v + 1).to_stream().to("out", S, L)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        inp.pipe_input("a", 1, 5)
        inp.pipe_input("a", 2, 6)
        inp.pipe_input("a", None, 7)
        out = driver.create_output_topic("out", S, L).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in out] == [
        ("a", 2, 5), ("a", 3, 6), ("a", None, 7)]


def test_table_operator_names():
    builder = StreamsBuilder()
    table = builder.table("in")
    assert table.filter(lambda k, v: True).node_name == "KTABLE-FILTER-0000000003"
    assert table.map_values(str).node_name == "KTABLE-MAPVALUES-0000000004"
    assert table.to_stream().node_name == "KTABLE-TOSTREAM-0000000005"
    assert table.group_by(lambda k, v: (k, v)).node_name == "KTABLE-SELECT-0000000006"
