"""``kspark store``: app.json, listing, argument parsing and errors found before Spark starts."""

from __future__ import annotations

import json
import os

import pytest
import typer
from query_topologies import COUNTS, EVENTS, SESSIONS, TOTALS, counter_topology, reader_topology
from typer.testing import CliRunner

from kspark import io
from kspark.cli import app as cli
from kspark.cli_store import parse_key, parse_time
from kspark.spark import StreamsApp
from kspark.spark.internals.query import load_app_info, write_app_info

runner = CliRunner()


@pytest.fixture
def a_dir(app_dir):
    """The checkpoint directory of application A with its app.json (no Spark needed)."""
    app = StreamsApp(counter_topology(), "app-a", {EVENTS: io.memory()},
                     checkpoint_dir=os.path.join(app_dir, "a"), config={"state.buckets": 8})
    write_app_info(app)
    return app.checkpoint_dir


def test_app_json_describes_every_store(a_dir, app_dir):
    info = load_app_info(a_dir)
    assert info["application_id"] == "app-a" and info["state_buckets"] == 8
    assert info["operators"] == 2
    counts = info["stores"][COUNTS]
    assert counts["kind"] == "window" and counts["params"]["window_size_ms"] == 86_400_000
    assert counts["changelog_topic"] == "app-a-event-counts-changelog"
    assert counts["operator_id"] == 0  # the last stage of the chain (after the repartition)
    assert {info["stores"][s]["operator_id"] for s in (TOTALS, SESSIONS)} == {1}
    b = StreamsApp(reader_topology("app-a"), "app-b",
                   {"app-a-event-counts-changelog": io.memory(), "questions": io.memory(),
                    "answers": io.memory()}, checkpoint_dir=os.path.join(app_dir, "b"))
    write_app_info(b)
    mine = load_app_info(b.checkpoint_dir)["stores"][COUNTS]
    assert mine["changelog_topic"] is None
    assert mine["source_topic"] == "app-a-event-counts-changelog"


def test_store_list(a_dir):
    result = runner.invoke(cli, ["store", "list", "--app-dir", a_dir])
    assert result.exit_code == 0, result.output
    for name in (COUNTS, TOTALS, SESSIONS, "app-a-sessions-changelog"):
        assert name in result.output


def test_errors_are_reported_before_starting_spark(a_dir, app_dir):
    query = ["store", "query", "--app-dir", a_dir, "--store"]
    result = runner.invoke(cli, [*query, "nope"])
    assert result.exit_code == 2
    assert "no store 'nope'" in result.output and "event-counts, sessions, totals" in result.output
    result = runner.invoke(cli, [*query, COUNTS, "--from", "2026-01-02", "--to", "2026-01-01"])
    assert result.exit_code == 2 and "is after" in result.output
    result = runner.invoke(cli, [*query, TOTALS, "--from", "5"])
    assert result.exit_code == 2 and "key-value store" in result.output
    result = runner.invoke(cli, [*query, COUNTS, "--from", "yesterday"])
    assert result.exit_code == 2 and "ISO-8601" in result.output
    result = runner.invoke(cli, ["store", "list", "--app-dir", app_dir])
    assert result.exit_code == 2 and "not a kspark application directory" in result.output


def test_keys_and_times_parse():
    assert parse_key("user-1|view", "str") == "user-1|view"
    assert parse_key("42", "int") == 42
    assert parse_key('["u", [1, 2]]', "json") == ("u", (1, 2))
    assert parse_time("1000", "--from") == 1000
    assert parse_time("1970-01-02", "--from") == 86_400_000
    assert parse_time("1970-01-01T01:00:00+01:00", "--from") == 0
    with pytest.raises(typer.BadParameter):
        parse_key("{", "json")
    assert json.loads(json.dumps(parse_time(None, "--to"))) is None
