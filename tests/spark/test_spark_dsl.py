"""The rest of the DSL on Spark (branching, repartition, topic extractors and fixed-key
processors run in ``test_spark_differential.py``'s topology): timestamp extractors, whose
partition times last across micro-batches, and cogroups (plain and per session, one side
repartitioned) give the test driver's results."""

from __future__ import annotations

import random

import pytest
from spark_harness import final_table, run_driver, run_spark

from kspark import Materialized, SessionWindows, StreamsBuilder, TimeWindows, serdes
from kspark.processor.timestamps import ValueField

pytestmark = pytest.mark.spark

S, J, L = serdes.String(), serdes.Json(), serdes.Long()
TW = serdes.TimeWindowed(S, 1_000)


def topology():
    b = StreamsBuilder()
    (b.stream("events", S, J, timestamp_extractor=ValueField("at")).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(1_000, 1_500))
     .count(Materialized("counts", caching=False))
     .to_stream().to("counts", TW, L))
    return b.build()


def test_event_time_from_the_value_equals_the_drivers(spark, app_dir):
    rng = random.Random(7)
    events = []
    for i in range(300):
        at = i * 40 - rng.randint(0, 2_500)  # out of order: some too late, some negative
        value = {"at": at} if rng.random() > 0.05 else {"no": 1}
        events.append((f"u{rng.randrange(5)}", value, 1_000_000 + i))  # written in order
    inputs, outputs, serdes_in = {"events": events}, {"counts": (TW, L)}, {"events": (S, J)}
    driver_metrics: dict[str, int] = {}
    expected = run_driver(topology(), inputs, outputs, serdes_in, metrics=driver_metrics)
    actual, app = run_spark(spark, topology(), inputs, outputs, serdes_in, app_dir, batches=3,
                            app_id="extractor")
    assert actual["counts"] == expected["counts"]
    # the windows follow the values' times, not the times the records were written with
    assert {r[0].window.start for r in actual["counts"]} <= set(range(0, 12_000, 1_000))
    metrics = app.metrics()
    for reason in ("dropped-records-invalid-timestamp", "dropped-records-expired-window"):
        assert metrics[reason] == driver_metrics[reason] > 0, reason


def cogroup_topology():
    b = StreamsBuilder()
    clicks = b.stream("clicks", S, L).group_by_key(S, L)
    # views are keyed by page: re-keyed to the user, so they reach the cogroup repartitioned
    views = b.stream("views", S, J).select_key(lambda k, v: v["user"]).group_by_key(S, J)
    cogrouped = (clicks.cogroup(lambda k, v, agg: agg + v)
                 .cogroup(views, lambda k, v, agg: agg + 1_000 * v["n"]))
    cogrouped.aggregate(lambda: 0, Materialized("totals", caching=False)).to_stream().to(
        "totals", S, L)
    # a grace longer than the input: the sessions do not depend on the order of the topics
    (cogrouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(500, 100_000))
     .aggregate(lambda: 0, lambda k, x, y: x + y, Materialized("sessions", caching=False))
     .to_stream().to("sessions", serdes.SessionWindowed(S), L))
    return b.build()


def test_cogroups_equal_the_drivers(spark, app_dir):
    rng = random.Random(3)
    clicks = [(f"u{rng.randrange(6)}", rng.randint(1, 9), i * 150) for i in range(200)]
    views = [(f"/p{rng.randrange(4)}", {"user": f"u{rng.randrange(6)}", "n": rng.randint(1, 3)},
              i * 150 + 75) for i in range(200)]
    inputs = {"clicks": clicks, "views": views}
    serdes_in = {"clicks": (S, L), "views": (S, J)}
    outputs = {"totals": (S, L), "sessions": (serdes.SessionWindowed(S), L)}
    expected = run_driver(cogroup_topology(), inputs, outputs, serdes_in)
    actual, _ = run_spark(spark, cogroup_topology(), inputs, outputs, serdes_in, app_dir,
                          batches=3, partitions=2, app_id="cogroup")
    for topic in outputs:
        assert expected[topic], topic
        assert final_table(actual[topic]) == final_table(expected[topic]), topic
