"""Differential tests: the Spark runtime's output equals the test driver's on the same records.

One topology holds several DSL branches (session count, session aggregate with a merger,
tumbling-window count, a re-keyed count across a repartition topic, a KTable aggregate with
a subtractor, a ``split`` of the clicks into branches, the clicks written to the topic a topic
extractor chooses, a fixed-key processor (``process_values``), a count after ``repartition`` into a
topic of 3 partitions, a table's updates re-keyed by ``to_stream(mapper)``), so one Spark
query checks them all. With caching off the whole update
stream must be equal; with caching on (flushes per record in the driver, per micro-batch on
Spark) the final table per key must be equal.
"""

from __future__ import annotations

import random

import pytest
from spark_harness import final_table as last_values
from spark_harness import run_driver, run_spark

from kspark import Materialized, SessionWindows, StreamsBuilder, TimeWindows, serdes
from kspark.processor import FixedKeyProcessor, ValueTransformerWithKey
from kspark.state import Stores

pytestmark = pytest.mark.spark

S = serdes.String()
J = serdes.Json()
SW = serdes.SessionWindowed(S)
TW = serdes.TimeWindowed(S, 10_000)

OUTPUTS = {
    "session-count": (SW, serdes.Long()),
    "session-pages": (SW, J),
    "window-count": (TW, serdes.Long()),
    "page-count": (S, serdes.Long()),
    "region-total": (S, serdes.Long()),
    "pages-home": (S, J),
    "pages-2": (S, J),
    "pages-0": (S, J),
    "accounts-by-region": (S, J),
    "page-visits": (S, serdes.Long()),
    "routed-home": (S, J),
    "routed-other": (S, J),
    "page-lengths": (S, J),
    "accounts-tagged": (S, J),
}
#: outputs no cache stands before: equal record for record with caching on too
UNCACHED = ("pages-home", "pages-2", "pages-0", "routed-home", "routed-other", "page-lengths")
#: a table's updates under new keys: with caching on, which survive depends on the flushes
REKEYED_UPDATES = ("accounts-by-region",)
#: counts the table's flushed updates, which caching combines per commit (driver: a record;
#: Spark: a micro-batch): equal with caching off only
COUNTS_FLUSHES = ("accounts-tagged",)
INPUT_SERDES = {"clicks": (S, J), "accounts": (S, J)}


class PageLength(FixedKeyProcessor):
    """Adds the page's length to each click; a "/" click comes out a second time, 1 ms later."""

    def process(self, record):
        self.context.forward(record.with_value({**record.value, "len": len(record.value["page"])}))
        if record.value["page"] == "/":
            self.context.forward(record.with_timestamp(record.timestamp + 1))


class AccountUpdates(ValueTransformerWithKey):
    """Each account's value with the number of updates its key has had (a deleted account
    becomes a value too), counted in the connected store ``account-updates-store``."""

    def init(self, context):
        super().init(context)
        self.seen = context.get_state_store("account-updates-store")

    def transform(self, key, value):
        n = (self.seen.get(key) or 0) + 1
        self.seen.put(key, n)
        return {"deleted": n} if value is None else {**value, "updates": n}


def topology(caching: bool):
    b = StreamsBuilder()
    clicks = b.stream("clicks", S, J)
    by_user = clicks.group_by_key(S, J)
    sessions = SessionWindows.of_inactivity_gap_and_grace(5_000, 3_000)
    (
        by_user.windowed_by(sessions)
        .count(Materialized("session-count-store", caching=caching))
        .to_stream()
        .to("session-count", SW, serdes.Long())
    )
    (
        by_user.windowed_by(sessions)
        .aggregate(
            lambda: [],
            lambda k, v, agg: [*agg, v["page"]],
            lambda k, a, b2: a + b2,
            Materialized("session-pages-store", caching=caching),
        )
        .to_stream()
        .to("session-pages", SW, J)
    )
    (
        by_user.windowed_by(TimeWindows.of_size_and_grace(10_000, 2_000))
        .count(Materialized("window-count-store", caching=caching))
        .to_stream()
        .to("window-count", TW, serdes.Long())
    )
    (
        clicks.group_by(lambda k, v: v["page"], S, J)
        .count(Materialized("page-count-store", caching=caching))
        .to_stream()
        .to("page-count", S, serdes.Long())
    )
    branches = (
        clicks.split(prefix="pages-")
        .branch(lambda k, v: v["page"] == "/", name="home")
        .branch(lambda k, v: v["page"] == "/a", chain=lambda s: s.map_values(
            lambda v: {**v, "a": True}))
        .default_branch()
    )
    for name, stream in branches.items():
        stream.to(name, S, J)
    clicks.to(lambda k, v, ctx: "routed-home" if v["page"] == "/" else "routed-other", S, J)
    clicks.process_values(PageLength).to("page-lengths", S, J)
    (
        clicks.select_key(lambda k, v: v["page"]).repartition(name="by-page", partitions=3)
        .group_by_key(S, J)
        .count(Materialized("page-visits-store", caching=caching))
        .to_stream()
        .to("page-visits", S, serdes.Long())
    )
    accounts = b.table("accounts", S, J, Materialized("accounts-store", caching=caching))
    accounts.to_stream(lambda k, v: v and v["region"]).to("accounts-by-region", S, J)
    b.add_state_store(Stores.key_value_store("account-updates-store", key_serde=S,
                                             value_serde=serdes.Long()))
    (accounts.transform_values(AccountUpdates, "account-updates-store").to_stream()
     .to("accounts-tagged", S, J))
    (
        accounts.group_by(lambda k, v: (v["region"], v["balance"]), S, serdes.Long())
        .aggregate(
            lambda: 0,
            lambda k, v, agg: agg + v,
            lambda k, v, agg: agg - v,
            Materialized("region-total-store", caching=caching),
        )
        .to_stream()
        .to("region-total", S, serdes.Long())
    )
    return b.build()


def random_input(seed: int, n: int = 240) -> dict[str, list]:
    rng = random.Random(seed)
    users = [f"u{i}" for i in range(6)]
    pages = ["/", "/a", "/b", "/c"]
    clicks, ts = [], 0
    for _ in range(n):
        ts += rng.choice([0, 200, 900, 2500, 7000])
        late = rng.random() < 0.15
        t = max(0, ts - rng.randint(0, 12_000)) if late else ts
        clicks.append((rng.choice(users), {"page": rng.choice(pages)}, t))
    accounts = []
    for i in range(n // 3):
        key = f"acct{rng.randrange(8)}"
        value = (
            None
            if rng.random() < 0.1
            else {"region": rng.choice("NSEW"), "balance": rng.randint(1, 100)}
        )
        accounts.append((key, value, i * 1000))
    return {"clicks": clicks, "accounts": accounts}


def final_table(records, topic=None):
    """The last value per key. For ``region-total`` a zero sum counts as absent: with caching
    a change that is added and subtracted within one commit never reaches the group at all,
    while per-record commits leave the group at 0 (both are Kafka Streams' behaviour)."""
    table = last_values(records)
    if topic == "region-total":
        table = {k: v for k, v in table.items() if v != 0}
    return table


@pytest.mark.parametrize("seed", [1, 2])
def test_update_streams_equal_with_caching_off(spark, app_dir, seed):
    inputs = random_input(seed)
    driver_metrics: dict[str, int] = {}
    expected = run_driver(topology(False), inputs, OUTPUTS, INPUT_SERDES,
                          metrics=driver_metrics)
    actual, app = run_spark(
        spark,
        topology(False),
        inputs,
        OUTPUTS,
        INPUT_SERDES,
        app_dir,
        batches=4,
        app_id=f"diff-off-{seed}",
    )
    for topic in OUTPUTS:
        assert expected[topic], f"{topic}: the driver produced nothing"
        assert actual[topic] == expected[topic], topic
    # late clicks were dropped and counted, as on the test driver
    assert app.metrics()["dropped-records-total"] == driver_metrics["dropped-records-total"] > 0


def test_update_streams_equal_with_one_state_bucket_in_memory(spark, app_dir):
    """``state.buckets.in.memory``: each store of a task holds one of its 8 buckets at a time
    in Spark's Python worker; the changed buckets it lets go of wait in spill files until the
    batch is written to Spark's state. The update streams equal the driver's."""
    inputs = random_input(5)
    expected = run_driver(topology(False), inputs, OUTPUTS, INPUT_SERDES)
    actual, app = run_spark(
        spark, topology(False), inputs, OUTPUTS, INPUT_SERDES, app_dir, batches=3,
        config={"state.buckets": 8, "state.buckets.in.memory": 1}, app_id="diff-spill",
    )
    for topic in OUTPUTS:
        assert expected[topic], f"{topic}: the driver produced nothing"
        assert actual[topic] == expected[topic], topic
    assert app.metrics()["state-buckets-spilled"] > 0


def test_batches_that_read_all_their_state_at_once_agree_with_one_batch(spark, app_dir):
    """With one state bucket a micro-batch of 2 or more keys per task reads every bucket of the
    task in one pass over Spark's state (``prefetch``) instead of one call per bucket. Four
    micro-batches, two tasks in each Spark task, each reading the state the one before wrote,
    must give the records one micro-batch gives (per partition in the same order)."""
    inputs = random_input(4)
    config = {"state.buckets": 1}
    runs = [
        run_spark(spark, topology(False), inputs, OUTPUTS, INPUT_SERDES, app_dir,
                  batches=batches, partitions=2, config=config,
                  app_id=f"diff-prefetch-{batches}")[0]
        for batches in (4, 1)
    ]
    for topic in OUTPUTS:
        assert runs[1][topic], f"{topic}: one micro-batch produced nothing"
        assert sorted(map(repr, runs[0][topic])) == sorted(map(repr, runs[1][topic])), topic


def test_final_tables_equal_with_caching_on(spark, app_dir):
    inputs = random_input(3)
    expected = run_driver(topology(True), inputs, OUTPUTS, INPUT_SERDES)
    actual, _ = run_spark(
        spark, topology(True), inputs, OUTPUTS, INPUT_SERDES, app_dir, batches=3, app_id="diff-on"
    )
    for topic in OUTPUTS:
        if topic in UNCACHED:
            assert actual[topic] == expected[topic], topic
            continue
        if topic in REKEYED_UPDATES or topic in COUNTS_FLUSHES:
            continue
        assert final_table(actual[topic], topic) == final_table(expected[topic], topic), topic
        # caching on Spark combines the updates of a whole micro-batch
        assert len(actual[topic]) <= len(expected[topic])


@pytest.mark.parametrize("most", [None, 9])
def test_session_windows_closed_equal_the_driver_in_slices_of_a_micro_batch(spark, app_dir,
                                                                            most):
    """The main job (sessions emitted when they close, through the session aggregations'
    batch path): with ``task.batch.max.records`` each task runs its micro-batch 9 records at a
    time, its stores held between the slices; the sessions and the late clicks dropped are the
    driver's, as when it runs the micro-batch at once."""
    from kspark.examples import sessions

    clicks = list(sessions.generate_clicks(400, users=5, seed=11, late_fraction=0.1))
    outputs = {"session-counts": (SW, serdes.Long()), "session-pages": (SW, J)}
    driver_metrics: dict[str, int] = {}
    expected = run_driver(sessions.topology(), {"clicks": clicks}, outputs,
                          {"clicks": (S, J)}, metrics=driver_metrics)
    actual, app = run_spark(
        spark, sessions.topology(), {"clicks": clicks}, outputs, {"clicks": (S, J)}, app_dir,
        batches=2, config={"task.batch.max.records": most}, app_id=f"diff-slices-{most}",
    )
    for topic in outputs:
        assert expected[topic], f"{topic}: the driver produced nothing"
        assert actual[topic] == expected[topic], topic
    assert app.metrics()["dropped-records-total"] == driver_metrics["dropped-records-total"] > 0
