"""The DSL wiring of windowed aggregations and suppression (the processors themselves are
tested in test_session*, test_time_window*, test_sliding*, test_suppress*)."""

from __future__ import annotations

import pytest
from dsl_util import record_from

from kspark import BufferConfig, Suppressed, serdes
from kspark.dsl import (
    Materialized,
    SessionWindowedKStream,
    StreamsBuilder,
    TimeWindowedKStream,
)
from kspark.dsl.internals.internal_serde import Pickle
from kspark.errors import TopologyError
from kspark.records import Change
from kspark.testing import TopologyTestDriver
from kspark.windows import (
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Window,
    Windowed,
)

S = serdes.String()
P = Pickle()


def W(key, start, end):
    return Windowed(key, Window(start, end))


def run(build, inputs, caching=False):
    """``build(grouped_stream, materialized) -> KTable``; pipe ``(key, value, ts)``; return the
    table's forwarded ``(key, Change, ts)`` and the driver's metrics."""
    builder = StreamsBuilder()
    table = build(builder.stream("in", S, S).group_by_key(),
                  Materialized("agg", caching=caching))
    changes = record_from(builder, table)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        for key, value, ts in inputs:
            inp.pipe_input(key, value, ts)
        metrics = driver.metrics()
    return changes, metrics


def test_windowed_by_returns_the_right_windowed_stream():
    grouped = StreamsBuilder().stream("in").group_by_key()
    assert isinstance(grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)),
                      SessionWindowedKStream)
    assert isinstance(grouped.windowed_by(TimeWindows.of_size_with_no_grace(5)),
                      TimeWindowedKStream)
    assert isinstance(grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(5)),
                      TimeWindowedKStream)
    with pytest.raises(TypeError):
        grouped.windowed_by(5)


def test_session_count():
    gap = SessionWindows.of_inactivity_gap_with_no_grace(10)
    changes, _ = run(lambda g, m: g.windowed_by(gap).count(m),
                     [("a", "x", 0), ("a", "y", 5), ("b", "z", 30)])
    assert changes == [
        (W("a", 0, 0), Change(1, None), 0),
        (W("a", 0, 0), Change(None, 1), 0),   # merged away
        (W("a", 0, 5), Change(2, None), 5),
        (W("b", 30, 30), Change(1, None), 30),
    ]


def test_session_reduce_and_aggregate_merge_sessions():
    gap = SessionWindows.of_inactivity_gap_and_grace(10, 20)   # grace keeps [0, 0] open
    inputs = [("a", "x", 0), ("a", "y", 20), ("a", "z", 10)]   # z bridges both sessions
    changes, _ = run(lambda g, m: g.windowed_by(gap).reduce(lambda agg, v: agg + v, m), inputs)
    assert changes[-1] == (W("a", 0, 20), Change("xyz", None), 20)
    merges = []

    def merger(key, a, b):
        merges.append((key, a, b))
        return a + b

    changes, _ = run(lambda g, m: g.windowed_by(gap).aggregate(
        lambda: "", lambda k, v, agg: agg + v, merger, m), inputs)
    assert changes[-1] == (W("a", 0, 20), Change("xyz", None), 20)
    assert merges == [("a", "", "x"), ("a", "x", "y")]


def test_tumbling_and_hopping_count_and_reduce():
    tumbling = TimeWindows.of_size_with_no_grace(10)
    changes, _ = run(lambda g, m: g.windowed_by(tumbling).count(m),
                     [("a", "x", 1), ("a", "y", 5), ("a", "z", 12)])
    assert [(k, c.new_value, ts) for k, c, ts in changes] == [
        (W("a", 0, 10), 1, 1), (W("a", 0, 10), 2, 5), (W("a", 10, 20), 1, 12)]
    hopping = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    changes, _ = run(lambda g, m: g.windowed_by(hopping).reduce(lambda a, v: a + v, m),
                     [("a", "x", 7), ("a", "y", 8)])
    assert [(k, c.new_value) for k, c, _ in changes] == [
        (W("a", 0, 10), "x"), (W("a", 5, 15), "x"), (W("a", 0, 10), "xy"), (W("a", 5, 15), "xy")]


def test_time_window_aggregate():
    tumbling = TimeWindows.of_size_with_no_grace(10)
    changes, _ = run(lambda g, m: g.windowed_by(tumbling).aggregate(
        list, lambda k, v, agg: [*agg, v], m), [("a", "x", 1), ("a", "y", 2)])
    assert [c.new_value for _, c, _ in changes] == [["x"], ["x", "y"]]


def test_sliding_windows_use_the_sliding_processor():
    sliding = SlidingWindows.of_time_difference_with_no_grace(10)
    changes, _ = run(lambda g, m: g.windowed_by(sliding).count(m), [("a", "x", 15)])
    assert changes == [(W("a", 5, 15), Change(1, None), 15)]


def test_windowed_null_keys_are_dropped_and_null_values_counted():
    tumbling = TimeWindows.of_size_with_no_grace(10)
    changes, metrics = run(lambda g, m: g.windowed_by(tumbling).count(m),
                           [(None, "x", 1), ("a", None, 2)])
    assert changes == [(W("a", 0, 10), Change(1, None), 2)]
    assert metrics["dropped-records-total"] == 1


def test_emit_strategy_on_window_close_returns_the_stream_and_is_used():
    windowed = StreamsBuilder().stream("in").group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(10))
    assert windowed.emit_strategy(EmitStrategy.on_window_close()) is windowed
    with pytest.raises(TypeError):
        windowed.emit_strategy("on_window_close")
    changes, _ = run(lambda g, m: g.windowed_by(TimeWindows.of_size_with_no_grace(10))
                     .emit_strategy(EmitStrategy.on_window_close()).count(m),
                     [("a", "x", 1), ("a", "y", 5), ("a", "z", 12)])
    assert [(k, c.new_value) for k, c, _ in changes] == [(W("a", 0, 10), 2)]


def test_windowed_stores_names_and_retention():
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count(
        Materialized("sessions", retention=100))
    windows = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).reduce(
        lambda a, b: a + b)
    assert sessions.queryable_store_name == "sessions"
    assert windows.node_name == "KSTREAM-REDUCE-0000000003"
    topology = builder.build()
    assert topology.store_builders["sessions"].kind == "session"
    assert topology.store_builders["KSTREAM-REDUCE-STATE-STORE-0000000002"].kind == "window"
    nodes = len(topology.nodes)
    with pytest.raises(ValueError, match="retention"):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count(
            Materialized("short", retention=14))
    assert len(topology.nodes) == nodes   # nothing half-added


def test_windowed_results_get_windowed_key_serdes_from_the_grouping():
    builder = StreamsBuilder()
    grouped = builder.stream("in", S, S).group_by_key()
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count() \
        .to_stream().to("sessions", value_serde=serdes.Long())
    sink = builder.build().nodes["KSTREAM-SINK-0000000004"]
    assert sink.key_serde == serdes.SessionWindowed(S)
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        out = driver.create_output_topic("sessions", serdes.SessionWindowed(S), serdes.Long())
        assert out.read_key_value() == (W("k", 3, 3), 1)

    hopping = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    assert grouped.windowed_by(hopping).count()._key_serde == serdes.TimeWindowed(S, 10)
    sliding = grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(7)).count()
    assert sliding._key_serde == serdes.TimeWindowed(S, 7)
    unknown = builder.stream("x").group_by(lambda k, v: v).windowed_by(hopping).count()
    assert unknown._key_serde is None


def test_windowed_aggregation_after_rekey_repartitions():
    builder = StreamsBuilder()
    (builder.stream("in", S, S).group_by(lambda k, v: v)
     .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count("s"))
    topology = builder.build()
    assert list(topology.internal_topics) == ["s-repartition"]
    assert len(topology.sub_topologies()) == 2
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        store = driver.get_session_store("s")
        assert store.fetch_session("v", 3, 3) == 1


# -- suppress ------------------------------------------------------------------------------
def _suppressed_out(build, inputs):
    builder = StreamsBuilder()
    build(builder.stream("in", S, S).group_by_key()).to_stream().to("out", P, serdes.Long())
    topology = builder.build()
    with TopologyTestDriver(topology) as driver:
        inp = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", P, serdes.Long())
        result = []
        for key, value, ts in inputs:
            inp.pipe_input(key, value, ts)
            result.append([(r.key, r.value) for r in out.read_records_to_list()])
    return topology, result


def test_suppress_until_window_closes_on_time_windows_uses_grace():
    until_close = Suppressed.until_window_closes(BufferConfig.unbounded())
    topology, out = _suppressed_out(
        lambda g: g.windowed_by(TimeWindows.of_size_and_grace(10, 3)).count()
        .suppress(until_close).map_values(lambda n: n),
        [("a", "x", 1), ("a", "y", 5), ("a", "z", 12), ("a", "w", 13)])
    # [0, 10) closes once stream time reaches 10 + grace 3
    assert out == [[], [], [], [(W("a", 0, 10), 2)]]
    assert "KTABLE-SUPPRESS-0000000003" in topology.nodes
    assert "KTABLE-SUPPRESS-STATE-STORE-0000000004" in topology.store_builders


def test_suppress_until_window_closes_on_sessions_uses_gap_plus_grace():
    until_close = Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final")
    topology, out = _suppressed_out(
        lambda g: g.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count()
        .suppress(until_close),
        [("a", "x", 0), ("b", "y", 14), ("b", "z", 15)])
    assert out == [[], [], [(W("a", 0, 0), 1)]]
    assert "final" in topology.nodes and "final-store" in topology.store_builders


def test_suppress_until_time_limit_uses_its_limit_not_the_grace():
    limit = Suppressed.until_time_limit(10, BufferConfig.max_records(100))
    _, out = _suppressed_out(
        lambda g: g.windowed_by(TimeWindows.of_size_and_grace(100, 50)).count().suppress(limit),
        [("a", "x", 1), ("a", "y", 2), ("b", "z", 11)])
    assert out == [[], [], [(W("a", 0, 100), 2)]]


def test_suppress_until_time_limit_on_a_plain_table():
    _, out = _suppressed_out(
        lambda g: g.count().suppress(Suppressed.until_time_limit(5)),
        [("a", "x", 1), ("a", "y", 2), ("b", "z", 6)])
    assert out == [[], [], [("a", 2)]]


def test_suppress_until_window_closes_needs_a_windowed_table():
    table = StreamsBuilder().stream("in").group_by_key().count()
    with pytest.raises(TopologyError, match="windowed KTable"):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    with pytest.raises(TypeError):
        table.suppress("until_window_closes")
