"""Store reuse on Spark (docs/semantics.md §7): application B reads application A's window store
from A's changelog directory, kept current while both run, restored again from scratch, and
B writes no changelog or copy of it."""

from __future__ import annotations

import json
import os

import pytest
from query_topologies import COUNTS, DAY, EVENTS, counter_topology, events, reader_topology

from kspark import io, serdes
from kspark.spark import StreamsApp
from kspark.state.internals.changelog import changelog_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow]
A_TOPIC = changelog_topic("app-a", COUNTS)


def _app_b(spark, root: str, name: str, questions, answers) -> StreamsApp:
    return StreamsApp(
        reader_topology("app-a"),
        "app-b",
        {
            A_TOPIC: io.files(os.path.join(root, "changelogs", A_TOPIC), format="kspark",
                              partitions=2),
            "questions": questions,
            "answers": answers,
        },
        spark=spark,
        checkpoint_dir=os.path.join(root, name),
        # B keeps changelogs in the same directory: none may appear for the reused store
        config={"state.changelog.dir": os.path.join(root, "changelogs")},
    )


def test_b_view_follows_a_and_restores_from_scratch(spark, app_dir):
    changelogs = os.path.join(app_dir, "changelogs")
    records = events(300, seed=9)
    source = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    source.send_all(records[:150])
    a = StreamsApp(counter_topology(), "app-a", {EVENTS: source}, spark=spark,
                   checkpoint_dir=os.path.join(app_dir, "a"),
                   config={"state.changelog.dir": changelogs})
    questions = io.memory(serdes.String(), serdes.Json(), partitions=2)
    answers = io.memory(serdes.String(), serdes.Json())
    b = _app_b(spark, app_dir, "b", questions, answers)
    a.start()
    b.start()
    try:
        a.process_all_available()
        b.process_all_available()
        first = a.store(COUNTS).all()
        assert len(first) > 10
        assert b.store(COUNTS).all() == first

        # A processes more input while B keeps running
        source.send_all(records[150:])
        a.process_all_available()
        b.process_all_available()
        second = a.store(COUNTS).all()
        assert second != first
        assert b.store(COUNTS).all() == second

        # B's processors read the same data: counts of the last 7 days for one user and type
        last = records[-1][2]
        key = second[-1].key.key
        questions.send(key, {}, last)
        questions.flush()
        b.process_all_available()
        day = last - last % DAY
        assert answers.records() == [(key, [
            [kv.key, kv.value] for kv in a.store(COUNTS).fetch_range(key, day - 6 * DAY, day)
        ], last)]
    finally:
        b.stop()
        a.stop()

    # B restarted from scratch (a new checkpoint) restores the same view
    b2 = _app_b(spark, app_dir, "b-fresh", io.memory(partitions=2), io.memory())
    b2.start()
    try:
        b2.process_all_available()
        assert b2.store(COUNTS).all() == second
    finally:
        b2.stop()

    # B created no changelog (or copy) topic: only A's changelogs exist
    assert sorted(os.listdir(changelogs)) == sorted(
        changelog_topic("app-a", s) for s in counter_topology().store_builders
    )
    with open(os.path.join(app_dir, "b", "app.json")) as f:
        info = json.load(f)["stores"][COUNTS]
    assert info["changelog_topic"] is None and info["source_topic"] == A_TOPIC
