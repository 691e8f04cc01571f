"""Joins on Spark equal the test driver's (docs/semantics.md §9): every join kind in one
topology, one Spark query, the driver fed in the order Spark processes the records (micro-batch
by micro-batch, a global table's records first, the two sides of a join merged by timestamp).

Stream-stream inner, left and outer joins (one side re-keyed through a repartition topic),
stream-table and stream-global-table joins, table-table inner, left and outer joins: with
caching off every update must be equal, with caching on the final table of each output.
"""

from __future__ import annotations

import random

import pytest
from spark_harness import (
    batch_chunks,
    final_table,
    run_driver_in_order,
    run_spark,
    spark_order,
)

from kspark import Joined, JoinWindows, Materialized, StreamJoined, StreamsBuilder, serdes

pytestmark = pytest.mark.spark

S = serdes.String()
J = serdes.Json()
INPUT_SERDES = {"clicks": (S, J), "views": (S, J), "profiles": (S, J), "regions": (S, J),
                "accounts": (S, J), "levels": (S, J)}
OUTPUTS = {name: (S, J) for name in (
    "ss-inner", "ss-left", "ss-outer", "ss-rekeyed", "st-inner", "st-left", "st-versioned",
    "gt-inner", "gt-left", "tt-inner", "tt-left", "tt-outer")}


def joined(left, right):
    return [left, right]


def topology(caching: bool):
    b = StreamsBuilder()
    clicks = b.stream("clicks", S, J)
    views = b.stream("views", S, J)
    clicks.join(views, joined, JoinWindows.of_time_difference_and_grace(2_000, 500)).to(
        "ss-inner", S, J)
    clicks.left_join(views, joined, JoinWindows.of_time_difference_with_no_grace(1_500)
                     .after(3_000)).to("ss-left", S, J)
    # named nodes, stores and repartition topics (Kafka Streams' StreamJoined / Joined names)
    clicks.outer_join(views, joined, JoinWindows.of_time_difference_and_grace(1_000, 1_000),
                      StreamJoined().with_name("outer").with_store_name("outer-store")
                      ).to("ss-outer", S, J)
    (clicks.select_key(lambda k, v: v["page"])
     .join(views.select_key(lambda k, v: v["page"]), joined,
           JoinWindows.of_time_difference_with_no_grace(3_000), StreamJoined(name="rekeyed"))
     .to("ss-rekeyed", S, J))
    profiles = b.table("profiles", S, J, Materialized("profiles", caching=caching))
    clicks.join(profiles, joined).to("st-inner", S, J)
    clicks.left_join(profiles, joined).to("st-left", S, J)
    # a versioned table read as of each click's time, the clicks held back 1.5 s for late rows
    levels = b.table("levels", S, J, Materialized("levels", versioned_history=60_000))
    clicks.left_join(levels, joined, Joined(grace=1_500, name="as-of")).to("st-versioned", S, J)
    regions = b.global_table("regions", S, J, "regions")
    clicks.join(regions, lambda k, v: v["page"], joined).to("gt-inner", S, J)
    clicks.left_join(regions, lambda k, v: v["page"], joined, name="gt-left").to("gt-left", S, J)
    accounts = b.table("accounts", S, J, Materialized("accounts", caching=caching))
    accounts.join(profiles, joined).to_stream().to("tt-inner", S, J)
    accounts.left_join(profiles, joined, Materialized("tt-left-store", caching=caching),
                       name="tt-left").to_stream().to("tt-left", S, J)
    accounts.outer_join(profiles, joined).to_stream().to("tt-outer", S, J)
    return b.build()


def random_input(seed: int, n: int = 160) -> dict[str, list]:
    rng = random.Random(seed)
    users = [f"user-{i}" for i in range(5)]
    pages = ["/", "/a", "/b"]

    def stream(size: int) -> list:
        out, ts = [], 0
        for _ in range(size):
            ts += rng.choice([0, 300, 800, 2_500])
            t = max(0, ts - rng.randint(0, 4_000)) if rng.random() < 0.15 else ts
            out.append((rng.choice(users), {"page": rng.choice(pages)}, t))
        return out

    def table(keys: list[str], size: int, step: int) -> list:
        return [(rng.choice(keys), None if rng.random() < 0.15 else {"v": rng.randint(0, 9)},
                 i * step) for i in range(size)]

    levels = table(users, n // 4, 1_200)
    levels = [(k, v, max(0, t - rng.randint(0, 3_000))) for k, v, t in levels]  # out of order
    return {"clicks": stream(n), "views": stream(n), "profiles": table(users, n // 4, 1_500),
            "regions": [(page, {"v": i}, i) for i, page in enumerate(pages)],
            "accounts": table(users, n // 4, 1_700),
            "levels": levels}


@pytest.mark.parametrize("seed", [11, 12])
def test_every_join_kind_equals_the_driver_with_caching_off(spark, app_dir, seed):
    inputs = random_input(seed)
    order = spark_order(inputs, batches=4, first=("regions",))
    expected = run_driver_in_order(topology(False), order, OUTPUTS, INPUT_SERDES)
    actual, app = run_spark(spark, topology(False), inputs, OUTPUTS, INPUT_SERDES, app_dir,
                            batches=4, app_id=f"joins-off-{seed}")
    for topic in OUTPUTS:
        assert expected[topic], f"{topic}: the driver produced nothing"
        assert actual[topic] == expected[topic], topic
    assert app.metrics()["dropped-records-total"] == 0


def test_final_tables_equal_with_caching_on(spark, app_dir):
    inputs = random_input(13)
    order = spark_order(inputs, batches=3, first=("regions",))
    expected = run_driver_in_order(topology(True), order, OUTPUTS, INPUT_SERDES)
    actual, _ = run_spark(spark, topology(True), inputs, OUTPUTS, INPUT_SERDES, app_dir,
                          batches=3, app_id="joins-on")
    for topic in ("tt-inner", "tt-left", "tt-outer"):
        assert final_table(actual[topic]) == final_table(expected[topic]), topic
        assert len(actual[topic]) <= len(expected[topic])
    for topic in ("ss-inner", "ss-left", "st-left", "gt-left"):  # streams: no cache
        assert actual[topic] == expected[topic], topic


def by_key(records):
    out: dict = {}
    for key, value, ts in records:
        out.setdefault(key, []).append((value, ts))
    return out


def test_two_tasks_join_their_own_keys_and_keep_the_whole_global_table(spark, app_dir):
    """Two partitions, so two tasks: each joins the records of its partition (its own stream
    time), and each keeps every row of the global table (read from both of its partitions).
    The driver runs once per partition on that partition's records (and the whole global
    table); per key, Spark's output equals its partition's driver run."""
    from kspark.hashing import kafka_partition

    inputs = random_input(21)
    expected: dict[str, dict] = {topic: {} for topic in OUTPUTS}
    for p in range(2):
        order = spark_order(inputs, batches=3, first=("regions",), keep=lambda t, r, p=p: (
            t == "regions" or kafka_partition(S.serialize(r[0]), 2) == p))
        out = run_driver_in_order(topology(False), order, OUTPUTS, INPUT_SERDES)
        for topic in OUTPUTS:
            if topic != "ss-rekeyed":  # re-keyed records change partition
                expected[topic].update(by_key(out[topic]))
    actual, _ = run_spark(spark, topology(False), inputs, OUTPUTS, INPUT_SERDES, app_dir,
                          batches=3, partitions=2, app_id="joins-two-tasks")
    for topic in OUTPUTS:
        if topic != "ss-rekeyed":
            assert expected[topic], topic
            assert by_key(actual[topic]) == expected[topic], topic
    # both tasks joined global rows that came from both of the global topic's partitions
    joined_pages = {(kafka_partition(S.serialize(key), 2), value[0]["page"])
                    for key, value, _ in actual["gt-inner"]}
    pages = {page for _, page in joined_pages}
    assert {p for p, _ in joined_pages} == {0, 1}
    assert {kafka_partition(S.serialize(page), 2) for page in pages} == {0, 1}


def test_a_restart_in_the_middle_of_the_input_gives_the_same_joins(spark, app_dir):
    """The app is stopped after two of its four micro-batches and a new one resumes from the
    checkpoint: the join stores, the outer-join store's pending records and each join's stream
    time come back from Spark's state, and the outputs equal one uninterrupted driver run."""
    import os

    from kspark import io
    from kspark.spark import StreamsApp

    inputs = random_input(31)
    batches = 4
    order = spark_order(inputs, batches=batches, first=("regions",))
    expected = run_driver_in_order(topology(False), order, OUTPUTS, INPUT_SERDES)
    chunks = {t: batch_chunks(r, batches) for t, r in inputs.items()}
    sources = {t: io.memory(*INPUT_SERDES[t], max_files_per_trigger=1) for t in inputs}
    sinks = {t: io.memory(ks, vs) for t, (ks, vs) in OUTPUTS.items()}
    checkpoint = os.path.join(app_dir, "restart")

    def run(part: slice) -> None:
        for topic, source in sources.items():
            for chunk in chunks[topic][part]:
                source.send_all(chunk)
                source.flush()
        app = StreamsApp(topology(False), "joins-restart", {**sources, **sinks}, spark=spark,
                         checkpoint_dir=checkpoint)
        app.start()
        try:
            app.process_all_available()
        finally:
            app.stop()

    run(slice(0, 2))
    halfway = {t: len(s.records()) for t, s in sinks.items()}
    run(slice(2, None))
    for topic in OUTPUTS:
        assert 0 < halfway[topic] < len(expected[topic]) or topic.startswith("tt"), topic
        assert sinks[topic].records() == expected[topic], topic


FK_OUTPUTS = {"fk-inner": (S, J), "fk-left": (S, J)}
FK_SERDES = {"orders": (S, J), "customers": (S, J)}


def fk_topology():
    b = StreamsBuilder()
    orders = b.table("orders", S, J, Materialized("orders", caching=False))
    customers = b.table("customers", S, J, Materialized("customers", caching=False))
    customer = lambda order: order["customer"]  # noqa: E731
    orders.join(customers, joined, foreign_key_extractor=customer).to_stream().to(
        "fk-inner", S, J)
    orders.left_join(customers, joined, Materialized("fk-left-store", caching=False),
                     foreign_key_extractor=customer).to_stream().to("fk-left", S, J)
    return b.build()


def fk_input(seed: int, n: int = 120) -> dict[str, list]:
    rng = random.Random(seed)
    customers = [f"c{i}" for i in range(4)]
    orders = [(f"order-{rng.randrange(12)}",
               None if rng.random() < 0.1 else {"customer": rng.choice(customers),
                                                 "amount": rng.randint(1, 99)}, i * 100)
              for i in range(n)]
    names = [(rng.choice(customers), None if rng.random() < 0.15 else {"name": rng.random()},
              i * 300) for i in range(n // 3)]
    return {"orders": orders, "customers": names}


def test_foreign_key_joins_reach_the_drivers_tables_and_never_a_stale_result(spark, app_dir):
    """A foreign-key join's registrations reach the customers' side in the micro-batch after
    the order changed (its answers come back within one), so its updates come in another
    order than the driver's; every result it emits is the join of an order and a customer
    value that both existed, and its final tables equal the driver's, for both kinds and with
    two tasks."""
    inputs = fk_input(41)
    expected = run_driver_in_order(fk_topology(), spark_order(inputs, batches=4), FK_OUTPUTS,
                                   FK_SERDES)
    actual, _ = run_spark(spark, fk_topology(), inputs, FK_OUTPUTS, FK_SERDES, app_dir,
                          batches=4, partitions=2, app_id="joins-fk")
    orders = {json_key(v) for _, v, _ in inputs["orders"] if v is not None}
    customers = {json_key(v) for _, v, _ in inputs["customers"] if v is not None}
    for topic in FK_OUTPUTS:
        assert final_table(expected[topic]), topic
        assert final_table(actual[topic]) == final_table(expected[topic]), topic
        for _, value, _ in actual[topic]:
            if value is not None:
                order, customer = value
                assert json_key(order) in orders
                assert customer is None or json_key(customer) in customers


def json_key(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)
