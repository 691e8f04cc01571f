"""Dropped records are logged for people: each at DEBUG, summarised at WARNING per task and
reason at most once an interval, with the count since the last summary and one example."""

from __future__ import annotations

import logging

from kspark import SessionWindows, StreamsBuilder, serdes
from kspark.drop_log import DropLog
from kspark.testing import TopologyTestDriver


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "kspark.task"]


def test_drops_are_summarised_per_task_and_reason_at_most_once_an_interval(caplog):
    clock = _Clock()
    drops = DropLog(interval_s=5.0, clock=clock)
    caplog.set_level(logging.DEBUG, logger="kspark.task")
    for i in range(1000):
        drops.dropped("0_0", "expired-window", f"offset {i}")
    drops.dropped("0_1", "expired-window", "offset 7 of task 0_1")
    drops.dropped("0_0", "null-key", "offset 3, no key")
    assert _warnings(caplog) == [
        "task 0_0: 1 record(s) dropped (expired-window) since the last summary; e.g. offset 0",
        "task 0_1: 1 record(s) dropped (expired-window) since the last summary; e.g. offset 7 "
        "of task 0_1",
        "task 0_0: 1 record(s) dropped (null-key) since the last summary; e.g. offset 3, no key",
    ]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 1002  # every drop, with its own coordinates
    caplog.clear()
    drops.flush_due("0_0")  # within the interval: nothing
    assert _warnings(caplog) == []
    clock.now += 5.0
    drops.flush_due("0_0")
    assert _warnings(caplog) == [
        "task 0_0: 999 record(s) dropped (expired-window) since the last summary; e.g. offset 1"
    ]
    caplog.clear()
    drops.flush_due()  # nothing pending is not summarised
    assert _warnings(caplog) == []


def test_late_records_of_a_driver_run_log_one_warning_not_one_each(caplog, monkeypatch):
    import kspark.runtime.task

    # a drop log of this test's own: the process's one remembers earlier tests' summaries
    monkeypatch.setattr(kspark.runtime.task, "DROPS", DropLog())
    builder = StreamsBuilder()
    builder.stream("in", serdes.String(), serdes.Long()).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(10, 0)).count()
    caplog.set_level(logging.WARNING, logger="kspark.task")
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("in", serdes.String(), serdes.Long())
        pipe.pipe_input("k", 1, 10_000)
        for i in range(200):
            pipe.pipe_input("k", 1, i)  # every one late
        assert driver.metrics()["dropped-records-expired-window"] == 200
    warnings = _warnings(caplog)
    assert 1 <= len(warnings) < 10
    assert "dropped (expired-window)" in warnings[0] and "key 'k'" in warnings[0]
