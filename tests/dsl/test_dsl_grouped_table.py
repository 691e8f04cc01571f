"""KGroupedTable: seed 001's call order (subtract, then init, then add) and the re-key rule."""

from __future__ import annotations

import heapq
from types import SimpleNamespace

import pytest
from dsl_util import record_from
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark.dsl import Materialized, StreamsBuilder
from kspark.records import Change, ValueAndTimestamp
from kspark.testing import TopologyTestDriver

S = serdes.String()
J = serdes.Json()


class TopFive:
    """Scores per category kept in a min-heap; the result shows the five best. Every call of
    the initializer, adder and subtractor is logged."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def init(self) -> list:
        self.calls.append(("init",))
        return []

    def add(self, key, value, heap):
        self.calls.append(("add", key, tuple(value)))
        heap = list(heap)
        heapq.heappush(heap, tuple(value))
        return heap

    def subtract(self, key, value, heap):
        self.calls.append(("sub", key, tuple(value)))
        heap = [v for v in heap if v != tuple(value)]
        heapq.heapify(heap)
        return heap

    def take(self) -> list[tuple]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture(params=[True, False], ids=["cached", "uncached"])
def top_five(request):
    """driver, scores (input topic), top (TopFive), read() (outputs), rekeyed (re-keyed
    changes) of a top-5 per category
    over the table ``scores`` (player -> {"cat": c, "score": s})."""
    top = TopFive()
    builder = StreamsBuilder()
    grouped = builder.table("scores", S, J).group_by(
        lambda player, v: (v["cat"], (v["score"], player)))
    rekeyed = record_from(builder, grouped.node_name)
    table = grouped.aggregate(top.init, top.add, top.subtract,
                              Materialized("top", caching=request.param))
    table.map_values(lambda heap: heapq.nlargest(5, heap)).to_stream().to("out", S, J)
    with TopologyTestDriver(builder.build()) as driver:
        out = driver.create_output_topic("out", S, J)

        def read():
            return [(r.key, [tuple(x) for x in r.value] if r.value is not None else None)
                    for r in out.read_records_to_list()]

        yield SimpleNamespace(driver=driver, scores=driver.create_input_topic("scores", S, J),
                              top=top, read=read, rekeyed=rekeyed)


def test_call_order_first_value_update_and_delete(top_five):
    t = top_five
    t.scores.pipe_input("ann", {"cat": "A", "score": 5}, 1)
    assert t.top.take() == [("init",), ("add", "A", (5, "ann"))]
    assert t.read() == [("A", [(5, "ann")])]

    t.scores.pipe_input("bob", {"cat": "A", "score": 7}, 2)   # aggregate exists: no init
    assert t.top.take() == [("add", "A", (7, "bob"))]
    assert t.read() == [("A", [(7, "bob"), (5, "ann")])]

    t.scores.pipe_input("ann", {"cat": "A", "score": 9}, 3)   # update: subtract first, then add
    assert t.top.take() == [("sub", "A", (5, "ann")), ("add", "A", (9, "ann"))]
    assert t.read() == [("A", [(9, "ann"), (7, "bob")])]

    t.scores.pipe_input("ann", None, 4)                        # delete: subtract only
    assert t.top.take() == [("sub", "A", (9, "ann"))]
    assert t.read() == [("A", [(7, "bob")])]

    t.scores.pipe_input("bob", None, 5)                        # the group becomes empty
    assert t.top.take() == [("sub", "A", (7, "bob"))]
    assert t.read() == [("A", [])]

    t.scores.pipe_input("cid", {"cat": "A", "score": 1}, 6)   # [] is stored: still no init
    assert t.top.take() == [("add", "A", (1, "cid"))]


def test_initializer_runs_again_when_the_subtractor_leaves_nothing():
    calls = []

    def init():
        calls.append("init")
        return ()

    def add(key, value, agg):
        calls.append(("add", value))
        return (*agg, value)

    def subtract(key, value, agg):
        calls.append(("sub", value))
        rest = tuple(v for v in agg if v != value)
        return rest or None   # None: nothing left

    builder = StreamsBuilder()
    builder.table("t", S, S).group_by(lambda k, v: ("g", v)).aggregate(init, add, subtract, "a")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, S)
        inp.pipe_input("k", "x", 1)
        inp.pipe_input("k", "y", 2)   # same group: subtract x (-> None), then init, then add
        assert driver.get_key_value_store("a").get("g") == ("y",)
    assert calls == ["init", ("add", "x"), ("sub", "x"), "init", ("add", "y")]


def test_only_the_five_best_are_shown(top_five):
    t = top_five
    for i in range(7):
        t.scores.pipe_input(f"p{i}", {"cat": "A", "score": i * 10}, i)
    assert t.read()[-1] == ("A", [(60, "p6"), (50, "p5"), (40, "p4"), (30, "p3"), (20, "p2")])
    t.scores.pipe_input("p6", None, 8)
    assert t.read() == [("A", [(50, "p5"), (40, "p4"), (30, "p3"), (20, "p2"), (10, "p1")])]


def test_rekey_to_the_same_group_sends_one_change(top_five):
    t = top_five
    t.scores.pipe_input("ann", {"cat": "A", "score": 5}, 1)
    t.rekeyed.clear()
    t.top.take()
    t.read()
    t.scores.pipe_input("ann", {"cat": "A", "score": 6}, 2)
    assert [(k, c) for k, c, _ in t.rekeyed] == [("A", Change((6, "ann"), (5, "ann")))]
    assert t.top.take() == [("sub", "A", (5, "ann")), ("add", "A", (6, "ann"))]
    assert t.read() == [("A", [(6, "ann")])]   # one output for the one change


def test_rekey_to_another_group_subtracts_from_old_then_adds_to_new(top_five):
    t = top_five
    t.scores.pipe_input("ann", {"cat": "A", "score": 5}, 1)
    t.scores.pipe_input("bob", {"cat": "A", "score": 3}, 2)
    t.rekeyed.clear()
    t.top.take()
    t.read()
    t.scores.pipe_input("ann", {"cat": "B", "score": 8}, 3)
    assert [(k, c) for k, c, _ in t.rekeyed] == [
        ("A", Change(None, (5, "ann"))), ("B", Change((8, "ann"), None))]
    assert t.top.take() == [("sub", "A", (5, "ann")), ("init",), ("add", "B", (8, "ann"))]
    assert t.read() == [("A", [(3, "bob")]), ("B", [(8, "ann")])]
    store = t.driver.get_key_value_store("top")
    assert store.get("A") == [(3, "bob")] and store.get("B") == [(8, "ann")]


@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_output_timestamp_is_max_of_record_and_previous_aggregate(caching):
    builder = StreamsBuilder()
    (builder.table("t", S, J).group_by(lambda k, v: (v["g"], v["n"]))
     .reduce(lambda a, v: a + v, lambda a, v: a - v, Materialized("sums", caching=caching))
     .to_stream().to("out", S, J))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, J)
        inp.pipe_input("x", {"g": "G", "n": 5}, 100)
        inp.pipe_input("y", {"g": "G", "n": 2}, 50)    # add to an existing aggregate
        inp.pipe_input("x", {"g": "H", "n": 5}, 70)    # subtract from G, first value of H
        inp.pipe_input("z", {"g": "H", "n": 1}, 200)
        out = driver.create_output_topic("out", S, J).read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in out] == [
            ("G", 5, 100), ("G", 7, 100), ("G", 2, 100), ("H", 5, 70), ("H", 6, 200)]
        assert driver.get_key_value_store("sums").get_with_timestamp("G") == \
            ValueAndTimestamp(2, 100)


def test_count_follows_moves_and_deletes():
    builder = StreamsBuilder()
    (builder.table("t", S, S).group_by(lambda k, v: (v, k)).count("per-colour")
     .to_stream().to("out", S, serdes.Long()))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, S)
        for key, value in [("a", "red"), ("b", "red"), ("a", "blue"), ("b", None)]:
            inp.pipe_input(key, value, 1)
        out = driver.create_output_topic("out", S, serdes.Long()).read_key_values_to_list()
        assert out == [("red", 1), ("red", 2), ("red", 1), ("blue", 1), ("red", 0)]
        assert driver.get_key_value_store("per-colour").all() == [("blue", 1), ("red", 0)]


def test_reduce_that_subtracts_to_none_deletes_the_group():
    builder = StreamsBuilder()
    (builder.table("t", S, S).group_by(lambda k, v: ("all", v))
     .reduce(lambda a, v: a + v, lambda a, v: a.replace(v, "", 1) or None, "r")
     .to_stream().to("out", S, S))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, S)
        inp.pipe_input("k", "x", 1)
        inp.pipe_input("k", None, 2)
        out = driver.create_output_topic("out", S, S).read_key_values_to_list()
        assert out == [("all", "x"), ("all", None)]
        assert driver.get_key_value_store("r").all() == []


def test_null_group_keys_are_dropped_and_counted_but_old_values_still_subtracted():
    builder = StreamsBuilder()
    (builder.table("t", S, S).group_by(lambda k, v: (None if v == "none" else v, k))
     .count("c"))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, S)
        inp.pipe_input("a", "red", 1)
        inp.pipe_input("a", "none", 2)   # moves a to a null group: subtract from red only
        assert driver.metrics()["dropped-records-null-key"] == 1
        assert driver.get_key_value_store("c").all() == [("red", 0)]


# -- property: the aggregate equals a recomputation from the final upstream table ------------
updates = st.lists(
    st.tuples(st.sampled_from("abcdef"),
              st.one_of(st.none(), st.tuples(st.sampled_from("wxyz"), st.integers(-50, 50)))),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(updates=updates, caching=st.booleans(), upstream_caching=st.booleans())
def test_grouped_sums_equal_recomputation(updates, caching, upstream_caching):
    builder = StreamsBuilder()
    (builder.table("t", S, J, materialized=Materialized("up", caching=upstream_caching))
     .group_by(lambda k, v: (v[0], v[1]))
     .aggregate(lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v,
                Materialized("sums", caching=caching))
     .to_stream().to("out", S, J))
    final: dict[str, tuple[str, int]] = {}
    touched: set[str] = set()
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("t", S, J)
        for ts, (key, value) in enumerate(updates):
            inp.pipe_input(key, None if value is None else list(value), ts)
            if value is None:
                final.pop(key, None)
            else:
                final[key] = value
                touched.add(value[0])
        expected = {group: 0 for group in touched}
        for group, amount in final.values():
            expected[group] += amount
        assert dict(driver.get_key_value_store("sums").all()) == expected
        last = driver.create_output_topic("out", S, J).read_key_values_to_map()
        assert last == expected
