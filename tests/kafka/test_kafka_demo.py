"""``kspark demo`` (the main job): its figures agree with the test driver on the same clicks."""

from __future__ import annotations

import io
from collections import defaultdict

import pytest
from rich.console import Console

from kspark import serdes
from kspark.demo import run_demo
from kspark.examples.sessions import COUNTS_STORE, generate_clicks, topology
from kspark.hashing import kafka_partition
from kspark.testing import TopologyTestDriver

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def _expected(records, base, partitions=4):
    """Closed sessions, open sessions and late clicks by per-partition test drivers."""
    by_partition = defaultdict(list)
    for user, click, ts in generate_clicks(records, users=200, seed=7):
        by_partition[kafka_partition(user.encode(), partitions)].append((user, click, base + ts))
    closed, open_, late = set(), 0, 0
    for clicks in by_partition.values():
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in clicks:
                pipe.pipe_input(user, click, ts)
            out = driver.create_output_topic(
                "session-counts", serdes.SessionWindowed(serdes.String()), serdes.Long())
            ours = {(r.key.key, r.key.window.start, r.key.window.end, r.value)
                    for r in out.read_records_to_list()}
            stored = {(kv.key.key, kv.key.window.start, kv.key.window.end)
                      for kv in driver.get_session_store(COUNTS_STORE).all()}
            open_ += len(stored - {s[:3] for s in ours})
            closed |= ours
            late += driver.metrics()["dropped-records-expired-window"] // 2
    return closed, open_, late


def test_demo_runs_end_to_end_and_agrees_with_the_test_driver(spark, bootstrap, tmp_path):
    printed = io.StringIO()
    png = tmp_path / "demo.png"
    result = run_demo(records=1500, out=str(png), spark=spark, bootstrap=bootstrap,
                      console=Console(file=printed, width=120))
    closed, open_sessions, late = _expected(1500, result.base_ms)
    assert result.produced == result.processed == 1500
    assert set(result.sessions) == closed and len(result.sessions) == len(closed) > 100
    assert result.open_sessions == open_sessions
    assert result.late_dropped == late > 0
    assert result.out_of_order > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = printed.getvalue()
    assert "Summary" in text and f"{len(closed):,}" in text and str(png) in text
    # the processing rate apart from start-up and producing: the time in micro-batches is part
    # of the wall time after start-up, and the rate printed is the records over it
    assert 0 < result.busy_seconds <= result.seconds - result.startup_seconds
    assert result.startup_seconds > 0 and 0 < result.producing_seconds < result.seconds
    assert f"{result.processed / result.busy_seconds:,.0f}" in text
