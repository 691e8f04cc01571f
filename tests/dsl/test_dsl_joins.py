"""Joins on the test driver (docs/semantics.md §9): what each kind does with nulls, late and
unmatched records, how a failing joiner is reported, co-partitioning, and the ad-attribution
example. Record-for-record agreement with Kafka Streams is in tests/oracle."""

from __future__ import annotations

import pytest

from kspark import (
    Joined,
    JoinWindows,
    Materialized,
    StreamJoined,
    StreamsBuilder,
    StreamsError,
    TopologyError,
    TopologyTestDriver,
    serdes,
)
from kspark.examples import ad_attribution
from kspark.topology.internals.plan import ExecutionPlan

S = serdes.String()
WINDOWS = JoinWindows.of_time_difference_and_grace(10, 5)


def pair(left, right):
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def _run(build, records):
    builder = StreamsBuilder()
    build(builder)
    with TopologyTestDriver(builder.build()) as driver:
        pipes = {}
        for topic, key, value, ts in records:
            if topic not in pipes:
                pipes[topic] = driver.create_input_topic(topic, S, S)
            pipes[topic].pipe_input(key, value, ts)
        out = driver.create_output_topic("out", S, S)
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()], \
            driver.metrics()


def _streams(b, kind, windows=WINDOWS):
    left, right = b.stream("left", S, S), b.stream("right", S, S)
    getattr(left, kind)(right, pair, windows, StreamJoined.with_(S, S, S)).to("out", S, S)


def test_inner_join_pairs_within_the_window_at_the_later_timestamp():
    out, _ = _run(lambda b: _streams(b, "join"), [
        ("left", "a", "x", 10), ("right", "a", "y", 15), ("right", "a", "z", 21),
        ("right", "b", "w", 15), ("left", "a", "v", 30)])
    # z@21 is 11 ms after x@10: outside; v@30 pairs with z@21 (9 ms before it)
    assert out == [("a", "x+y", 15), ("a", "v+z", 30)]


def test_a_joiner_gets_its_own_copy_of_the_other_sides_value():
    json = serdes.Json()

    def counting(left, right):  # changes the value it is given
        right["seen"] = right.get("seen", 0) + 1
        return f"{left['v']}+{right['v']}:{right['seen']}"

    builder = StreamsBuilder()
    left, right = builder.stream("left", S, json), builder.stream("right", S, json)
    left.join(right, counting, WINDOWS, StreamJoined.with_(S, json, json)).to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("right", S, json).pipe_input("a", {"v": "r"}, 10)
        lefts = driver.create_input_topic("left", S, json)
        lefts.pipe_input("a", {"v": "x"}, 11)
        lefts.pipe_input("a", {"v": "y"}, 12)
        out = driver.create_output_topic("out", S, S).read_values_to_list()
    assert out == ["x+r:1", "y+r:1"]  # as stored when it arrived, each time


def test_a_stored_value_is_the_one_each_record_has_when_it_is_put():
    # the bytes an unmatched value got for the outer-join store are also its window store's;
    # a value object that comes again, changed (an upstream step reusing one dict), is written
    # anew
    json = serdes.Json()
    reused: dict = {}

    def reuse(value):
        reused["v"] = value
        return reused

    def joined(left, right):
        return f"{'null' if left is None else left['v']}+{right['v']}"

    builder = StreamsBuilder()
    left = builder.stream("left", S, S).map_values(reuse)
    right = builder.stream("right", S, json)
    left.left_join(right, joined, WINDOWS, StreamJoined.with_(S, json, json)).to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        lefts = driver.create_input_topic("left", S, S)
        rights = driver.create_input_topic("right", S, json)
        lefts.pipe_input("a", "x", 10)  # unmatched: into the outer-join store and its window
        rights.pipe_input("a", {"v": "y"}, 12)
        lefts.pipe_input("a", "z", 13)  # the same dict, now z, matched
        rights.pipe_input("a", {"v": "w"}, 14)
        out = driver.create_output_topic("out", S, S).read_values_to_list()
    assert out == ["x+y", "z+y", "x+w", "z+w"]


@pytest.mark.parametrize("kind", ["join", "outer_join"])
def test_a_value_read_back_is_the_one_put_whatever_later_happens_to_its_object(kind):
    # one dict reused upstream for every right value, and a joiner that changes what it is
    # given: each join and each unmatched record gets the right value as it was put
    json = serdes.Json()
    reused: dict = {}

    def reuse(value):
        reused.clear()
        reused.update(value)
        return reused

    def joined(left, right):
        text = f"{'null' if left is None else left}+{'null' if right is None else right['v']}"
        if right is not None:
            right["v"] = "changed"
        return text

    builder = StreamsBuilder()
    left = builder.stream("left", S, S)
    right = builder.stream("right", S, json).map_values(reuse)
    getattr(left, kind)(right, joined, WINDOWS, StreamJoined.with_(S, S, json)).to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        lefts = driver.create_input_topic("left", S, S)
        rights = driver.create_input_topic("right", S, json)
        rights.pipe_input("a", {"v": "r1"}, 10)
        rights.pipe_input("b", {"v": "r2"}, 11)  # never matched
        lefts.pipe_input("a", "x", 12)
        lefts.pipe_input("a", "y", 13)
        lefts.pipe_input("c", "z", 100)  # closes the windows
        out = driver.create_output_topic("out", S, S).read_values_to_list()
    expected = ["x+r1", "y+r1"]
    if kind == "outer_join":
        expected.append("null+r2")
    assert out == expected


def test_left_join_emits_an_unmatched_record_only_once_its_window_closes():
    out, _ = _run(lambda b: _streams(b, "left_join"), [
        ("left", "a", "x", 10), ("left", "b", "u", 12), ("right", "a", "y", 20),
        ("right", "c", "t", 26),    # stream time 26 <= 12 + 10 + 5 + 1: b still open
        ("right", "c", "s", 28)])   # 28 > 27: b@12 has closed
    assert out == [("a", "x+y", 20), ("b", "u+null", 12)]


def test_outer_join_emits_both_sides_unmatched_records():
    out, _ = _run(lambda b: _streams(b, "outer_join"), [
        ("left", "a", "x", 10), ("right", "b", "y", 11), ("left", "c", "z", 100)])
    assert out == [("a", "x+null", 10), ("b", "null+y", 11)]


def test_nulls_in_stream_joins_are_dropped_and_counted_or_joined_as_kafka_streams_does():
    records = [("left", None, "x", 10), ("left", "a", None, 11), ("right", None, "y", 12)]
    out, metrics = _run(lambda b: _streams(b, "join"), records)
    assert out == [] and metrics["dropped-records-null-key"] == 2
    assert metrics["dropped-records-null-value"] == 1
    # left join: a null key with a value is joined with nothing at once (left side only)
    out, metrics = _run(lambda b: _streams(b, "left_join"), records)
    assert out == [(None, "x+null", 10)] and metrics["dropped-records-null-key"] == 1
    out, _ = _run(lambda b: _streams(b, "outer_join"), records)
    assert out == [(None, "x+null", 10), (None, "null+y", 12)]


def test_a_late_record_is_not_stored_but_still_joined():
    # retention 10 + 10 + 5 = 25: a@0 arrives when the stores have seen 100
    out, metrics = _run(lambda b: _streams(b, "join"), [
        ("left", "a", "x", 100), ("right", "a", "y", 95), ("right", "a", "late", 0),
        ("left", "a", "v", 5)])
    assert out == [("a", "x+y", 100)]
    assert "dropped-records-expired-segment" not in metrics  # its 60 s segment still lives
    # each side's store expires by the records it holds itself
    out, metrics = _run(lambda b: _streams(b, "join"), [
        ("left", "a", "x", 5), ("right", "b", "y", 200_000), ("right", "a", "late", 0)])
    assert out == [("a", "x+late", 5)] and metrics["dropped-records-expired-segment"] == 1


def test_stream_table_joins_read_the_tables_current_value():
    def build(b):
        table = b.table("right", S, S, Materialized("table"))
        stream = b.stream("left", S, S)
        stream.join(table, pair, Joined.with_(S, S, S)).to("out", S, S)
        stream.left_join(table, pair).to("out", S, S)

    out, metrics = _run(build, [("left", "a", "x", 1), ("right", "a", "t", 2),
                                ("left", "a", "y", 3), ("right", "a", None, 4),
                                ("left", "a", "z", 5), ("left", None, "n", 6)])
    assert out == [("a", "x+null", 1), ("a", "y+t", 3), ("a", "y+t", 3), ("a", "z+null", 5),
                   (None, "n+null", 6)]
    assert metrics["dropped-records-null-key"] == 1  # the inner join's


def test_a_grace_period_needs_a_versioned_table():
    b = StreamsBuilder()
    table = b.table("right", S, S, "table")
    with pytest.raises(TopologyError, match="must be versioned"):
        b.stream("left", S, S).join(table, pair, Joined(grace=100))


def test_a_join_lists_its_grace_buffer_before_the_table_it_reads():
    """Kafka Streams adds a stream-table join's grace buffer with the processor and connects
    the table's store after it (``StreamTableJoinNode#writeToTopology``); the description lists
    a processor's stores in Java ``HashSet`` order, where ``j1-Buffer`` and ``table`` share a
    bucket, so insertion order shows (found by the oracle's ``headers`` shape)."""
    b = StreamsBuilder()
    table = b.table("right", S, S, Materialized("table", versioned_history=100))
    b.stream("left", S, S).join(table, pair, Joined(grace=10, name="j1")).to("out", S, S)
    assert "Processor: j1 (stores: [j1-Buffer, table])" in str(b.build().describe())


def test_a_versioned_table_answers_as_of_each_records_time_after_the_grace_period():
    def build(b):
        table = b.table("right", S, S, Materialized("levels", versioned_history=1_000))
        b.stream("left", S, S).join(table, pair, Joined(grace=10)).to("out", S, S)

    builder = StreamsBuilder()
    build(builder)
    with TopologyTestDriver(builder.build()) as driver:
        left = driver.create_input_topic("left", S, S)
        right = driver.create_input_topic("right", S, S)
        out = driver.create_output_topic("out", S, S)
        right.pipe_input("a", "gold", 20)
        left.pipe_input("a", "x", 15)  # held back: stream time 15, grace 10
        right.pipe_input("a", "silver", 10)  # out of order: valid from 10 until 20
        assert out.read_records_to_list() == []
        left.pipe_input("a", "y", 22)
        left.pipe_input("a", "z", 40)  # stream time 40: x@15 and y@22 are joined, in order
        assert [(r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("x+silver", 15), ("y+gold", 22)]
        store = driver.get_versioned_key_value_store("levels")
        assert store.get("a", 19).value == "silver" and store.get("a").value == "gold"


def test_global_table_joins_select_the_key_and_see_the_whole_table():
    def build(b):
        table = b.global_table("g", S, S, "global")
        b.stream("left", S, S).left_join(table, lambda k, v: v[:1] if v else None,
                                         pair).to("out", S, S)

    out, metrics = _run(build, [("g", "a", "A", 1), ("left", "k", "a1", 5),
                                ("left", "k", "b1", 6), ("left", "k", "", 7)])
    assert out == [("k", "a1+A", 5), ("k", "b1+null", 6), ("k", "+null", 7)]
    assert metrics["process-total"] == 3  # the global table's update is not a processed record


def test_table_joins_follow_both_tables_including_deletes():
    def build(b):
        left = b.table("left", S, S, Materialized("l", caching=False))
        right = b.table("right", S, S, Materialized("r", caching=False))
        left.outer_join(right, pair).to_stream().to("out", S, S)

    out, _ = _run(build, [("left", "a", "x", 10), ("right", "a", "y", 11),
                          ("left", "a", None, 12), ("right", "a", None, 13)])
    assert out == [("a", "x+null", 10), ("a", "x+y", 11), ("a", "null+y", 12), ("a", None, 13)]


def test_foreign_key_join_follows_a_row_to_its_new_foreign_key():
    def build(b):
        orders = b.table("left", S, S, Materialized("orders", caching=False))
        customers = b.table("right", S, S, Materialized("customers", caching=False))
        orders.left_join(customers, pair, foreign_key_extractor=lambda v: v[:1]).to_stream(
        ).to("out", S, S)

    out, _ = _run(build, [("right", "a", "Alice", 1), ("left", "o1", "a1", 10),
                          ("left", "o1", "b1", 11), ("right", "b", "Bob", 12),
                          ("right", "a", "Ann", 13), ("left", "o1", None, 14)])
    # Ann@13 reaches no order: o1 moved to b
    assert out == [("o1", "a1+Alice", 10), ("o1", "b1+null", 11), ("o1", "b1+Bob", 12),
                   ("o1", None, 14)]


def test_foreign_key_join_skips_a_versioned_right_tables_out_of_order_update():
    """As Kafka Streams (KIP-914): Ann@5, older than Alice@10, answers no subscription."""
    def build(b):
        orders = b.table("left", S, S, Materialized("orders", caching=False))
        customers = b.table("right", S, S,
                            Materialized("customers", versioned_history=1_000))
        orders.join(customers, pair, foreign_key_extractor=lambda v: v[:1]).to_stream(
        ).to("out", S, S)

    out, metrics = _run(build, [("right", "a", "Alice", 10), ("left", "o1", "a1", 11),
                                ("right", "a", "Ann", 5), ("right", "a", None, 6),
                                ("right", "a", "Al", 12)])
    assert out == [("o1", "a1+Alice", 11), ("o1", "a1+Al", 12)]
    assert metrics["dropped-records-not-latest"] == 2


def test_join_topologies_travel_pickled_and_run_the_same():
    # topologies go to Spark's workers through cloudpickle, compiled operators with them
    from pyspark import cloudpickle

    def build(b):
        left = b.table("left", S, S, Materialized("l", caching=False))
        right = b.table("right", S, S)
        joined = left.join(right, pair).filter(lambda k, v: "z" not in v)
        joined.left_join(right.map_values(str.upper), pair).to_stream().to("out", S, S)
        b.stream("stream", S, S).left_join(joined, pair).to("out", S, S)

    records = [("left", "a", "x", 1), ("right", "a", "y", 2), ("stream", "a", "s", 3),
               ("left", "a", "z", 4), ("stream", "a", "t", 5)]
    original, copied = StreamsBuilder(), StreamsBuilder()
    build(original)
    build(copied)
    topology = cloudpickle.loads(cloudpickle.dumps(copied.build()))
    outputs = []
    for topo in (original.build(), topology):
        with TopologyTestDriver(topo) as driver:
            for topic, key, value, ts in records:
                driver.create_input_topic(topic, S, S).pipe_input(key, value, ts)
            outputs.append(driver.create_output_topic("out", S, S).read_key_values_to_list())
    assert outputs[0] == outputs[1]
    assert ("a", "x+y+Y") in outputs[0] and ("a", "s+x+y") in outputs[0]


def test_a_joiner_that_raises_names_the_processor_and_the_record():
    def build(b):
        left, right = b.stream("left", S, S), b.stream("right", S, S)
        left.join(right, lambda a, c: 1 / 0, WINDOWS).to("out", S, S)

    with pytest.raises(StreamsError) as err:
        _run(build, [("left", "a", "x", 10), ("right", "a", "y", 11)])
    first = str(err.value).splitlines()[0]
    assert "processor 'KSTREAM-JOINOTHER-0000000005'" in first
    assert "ZeroDivisionError" in first
    assert "topic 'right' partition 0 offset 0 key 'a'" in first


def test_joined_topics_must_be_co_partitioned():
    b = StreamsBuilder()
    left = b.stream("left", S, S)
    left.join(b.stream("right", S, S), pair, WINDOWS).to("out", S, S)
    topology = b.build()
    assert ExecutionPlan.of(topology, {"left": 4, "right": 4, "out": None}).tasks == 4
    with pytest.raises(TopologyError,
                       match=r"topics 'left' \(4 partitions\), 'right' \(2 partitions\) are "
                             r"joined by .*co-partitioning"):
        ExecutionPlan.of(topology, {"left": 4, "right": 2, "out": None})


def test_a_repartitioned_side_takes_the_other_sides_partition_count():
    b = StreamsBuilder()
    left = b.stream("left", S, S).select_key(lambda k, v: v)
    left.join(b.stream("right", S, S), pair, WINDOWS).to("out", S, S)
    topology = b.build()
    plan = ExecutionPlan.of(topology, {"left": 8, "right": 3, "out": None})
    (repartition,) = topology.internal_topics
    assert plan.partitions[repartition] == 3 and plan.tasks == 8


def test_the_ad_attribution_example_attributes_every_impression_once():
    events = ad_attribution.generate_events(1_500)
    with TopologyTestDriver(ad_attribution.topology()) as driver:
        pipes = {t: driver.create_input_topic(t, S, serdes.Json())
                 for t in ("impressions", "clicks", "campaigns")}
        for topic, key, value, ts in ad_attribution.events_iter(events):
            pipes[topic].pipe_input(key, value, ts)
        # an impression far in the future closes every window
        pipes["impressions"].pipe_input("last", {"campaign": "campaign-0", "user": "u",
                                                 "ts": 10**9}, 10**9)
        out = driver.create_output_topic("attributed-impressions", S, serdes.Json())
        attributed = {r.key: r.value for r in out.read_records_to_list()}
        stats = driver.create_output_topic("campaign-stats", S, serdes.Json())
        per_campaign = stats.read_key_values_to_map()
    shown = {key: value for key, value, _ in events["impressions"]}
    assert set(attributed) == set(shown)  # each once: every id is a key of one record
    window = ad_attribution.ATTRIBUTION_MS
    in_time = {key for key, click, _ in events["clicks"]
               if 0 <= click["ts"] - shown[key]["ts"] <= window}
    assert {k for k, v in attributed.items() if v["clicked"]} == in_time
    assert all(v["campaign_name"] == f"Campaign {v['campaign'].split('-')[1]}"
               for v in attributed.values())
    assert sum(s["shown"] for s in per_campaign.values()) == len(shown)
    assert sum(s["clicked"] for s in per_campaign.values()) == len(in_time)
