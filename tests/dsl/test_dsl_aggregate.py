"""KGroupedStream count / reduce / aggregate (docs/semantics.md §4, §6 caching)."""

from __future__ import annotations

import pytest
from dsl_util import record_from

from kspark import serdes
from kspark.dsl import Materialized, StreamsBuilder
from kspark.records import Change, ValueAndTimestamp
from kspark.testing import TopologyTestDriver

S = serdes.String()
CACHING = pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])


def _out(driver, value_serde=None):
    topic = driver.create_output_topic("out", S, value_serde or serdes.Json())
    return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]


@CACHING
def test_count_per_key_with_output_timestamp_max_of_record_and_previous(caching):
    builder = StreamsBuilder()
    table = builder.stream("in", S, S).group_by_key().count(
        Materialized("counts", caching=caching))
    table.to_stream().to("out", S, serdes.Long())
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("a", "x", 10)
        inp.pipe_input("a", "y", 5)   # out of order: keeps the aggregate's timestamp 10
        inp.pipe_input("b", "z", 3)
        inp.pipe_input("a", "w", 20)
        assert _out(driver, serdes.Long()) == [
            ("a", 1, 10), ("a", 2, 10), ("b", 1, 3), ("a", 3, 20)]
        store = driver.get_key_value_store("counts")
        assert store.get_with_timestamp("a") == ValueAndTimestamp(3, 20)
        assert store.get_with_timestamp("b") == ValueAndTimestamp(1, 3)


def _split_count(caching: bool):
    builder = StreamsBuilder()
    table = (builder.stream("in", S, S).flat_map_values(str.split).group_by_key()
             .count(Materialized("counts", caching=caching)))
    changes = record_from(builder, table)
    return builder, changes


def test_caching_forwards_one_change_per_key_per_commit():
    builder, changes = _split_count(caching=True)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("a", "x y z", 7)   # three updates of "a" within one commit
        inp.pipe_input("a", "q", 8)
        inp.pipe_input("b", "", 9)        # no update, no output
    assert changes == [("a", Change(3, None), 7), ("a", Change(4, 3), 8)]


def test_without_caching_every_update_is_forwarded():
    builder, changes = _split_count(caching=False)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("a", "x y z", 7)
        inp.pipe_input("a", "q", 8)
    assert changes == [("a", Change(1, None), 7), ("a", Change(2, 1), 7),
                       ("a", Change(3, 2), 7), ("a", Change(4, 3), 8)]


@CACHING
def test_reduce_takes_the_first_value_as_is(caching):
    calls = []

    def reducer(agg, value):
        calls.append((agg, value))
        return agg + value

    builder = StreamsBuilder()
    builder.stream("in", S, S).group_by_key().reduce(
        reducer, Materialized("r", caching=caching)).to_stream().to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "a", 3)
        inp.pipe_input("k", "b", 1)
        inp.pipe_input("j", "c", 2)
        inp.pipe_input("k", "d", 4)
        assert _out(driver, S) == [("k", "a", 3), ("k", "ab", 3), ("j", "c", 2),
                                   ("k", "abd", 4)]
    assert calls == [("a", "b"), ("ab", "d")]


@CACHING
def test_aggregate_initializes_once_per_key_and_passes_key_value_agg(caching):
    calls = []

    def init():
        calls.append("init")
        return []

    def agg(key, value, aggregate):
        calls.append(("agg", key, value, tuple(aggregate)))
        return [*aggregate, value]

    builder = StreamsBuilder()
    builder.stream("in", S, S).group_by_key().aggregate(
        init, agg, Materialized("lists", caching=caching)).to_stream().to("out", S)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "1", 1)
        inp.pipe_input("k", "2", 2)
        inp.pipe_input("j", "3", 3)
        assert _out(driver) == [("k", ["1"], 1), ("k", ["1", "2"], 2), ("j", ["3"], 3)]
    assert calls == ["init", ("agg", "k", "1", ()), ("agg", "k", "2", ("1",)),
                     "init", ("agg", "j", "3", ())]


@CACHING
def test_null_keys_and_values_are_skipped_and_counted(caching):
    builder = StreamsBuilder()
    builder.stream("in", S, S).group_by_key().count(
        Materialized("c", caching=caching)).to_stream().to("out", S, serdes.Long())
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input(None, "x", 1)
        inp.pipe_input("a", None, 2)
        inp.pipe_input("a", "y", 3)
        assert _out(driver, serdes.Long()) == [("a", 1, 3)]
        metrics = driver.metrics()
        assert metrics["dropped-records-total"] == 2
        assert metrics["dropped-records-null-key"] == 1
        assert metrics["dropped-records-null-value"] == 1
        assert driver.get_key_value_store("c").all() == [("a", 1)]


def test_null_values_after_a_repartition_are_counted_at_the_aggregation():
    builder = StreamsBuilder()
    builder.stream("in", S, S).group_by(lambda k, v: k).count("c")
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, S).pipe_input("a", None, 2)
        assert driver.metrics()["dropped-records-null-value"] == 1
        assert driver.get_key_value_store("c").all() == []


def test_materialized_controls_store_name_caching_and_logging():
    builder = StreamsBuilder()
    grouped = builder.stream("in", S, S).group_by_key()
    named = grouped.count("by-name")
    quiet = grouped.count(Materialized("quiet", caching=False, logging=False))
    default = grouped.count()
    topology = builder.build()
    assert named.queryable_store_name == "by-name"
    assert quiet.queryable_store_name == "quiet"
    assert default.queryable_store_name is None
    stores = topology.store_builders
    assert (stores["by-name"].caching, stores["by-name"].logging) == (True, True)
    assert (stores["quiet"].caching, stores["quiet"].logging) == (False, False)
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("in", S, S).pipe_input("a", "x", 5)
        assert driver.changelogs["by-name"] == [("a", 1, 5)]
        assert "quiet" not in driver.changelogs
        assert driver.get_key_value_store("quiet").get("a") == 1


def test_materialized_rejects_bad_arguments():
    with pytest.raises(ValueError):
        Materialized("")
    with pytest.raises(ValueError):
        Materialized("x", retention=-1)
    with pytest.raises(TypeError):
        StreamsBuilder().stream("in").group_by_key().count(materialized=42)
    assert Materialized.as_("s").with_caching_disabled() == Materialized("s", caching=False)


def test_aggregation_result_feeds_downstream_table_operators():
    builder = StreamsBuilder()
    (builder.stream("in", S, S).group_by_key().count("c")
     .filter(lambda k, n: n % 2 == 0).to_stream().to("out", S, serdes.Long()))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        for ts in range(1, 5):
            inp.pipe_input("a", "x", ts)
        out = driver.create_output_topic("out", S, serdes.Long())
        # 1 fails (nothing), 2 passes, 3 fails (delete of 2), 4 passes
        assert [(r.key, r.value) for r in out.read_records_to_list()] == [
            ("a", 2), ("a", None), ("a", 4)]
