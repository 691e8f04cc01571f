"""The driver's figures of a running app (kspark.spark.internals.live_metrics): totals since
start, and Kafka Streams' rates, averages and maxima over the last 30 s sample window only."""

from __future__ import annotations

import math

from kspark.runtime.metrics import Metrics
from kspark.spark.internals.live_metrics import SAMPLE_WINDOW_S, LiveMetrics


def _figures(processed: int, lateness: list[int], late: int = 0) -> Metrics:
    m = Metrics()
    m.inc("process-total", processed)
    m.inc("record-lateness-sum", sum(lateness))
    m.inc("record-lateness-count", len(lateness))
    m.observe_max("record-lateness-max", max(lateness))
    if late:
        m.dropped("expired-window", late)
    m.gauges["estimate-num-keys:counts"] = processed
    m.gauges["state-bytes:counts"] = 100 * processed
    return m


def test_windowed_figures_cover_the_last_sample_window_and_totals_everything():
    now = [0.0]
    live = LiveMetrics(clock=lambda: now[0])
    now[0] = 1.0
    live.record({"0_0": _figures(10, [0, 5000], late=2), "": Metrics()}, commit_ms=100.0)
    now[0] = 50.0
    live.record({"0_0": _figures(30, [0, 7, 2]), "0_1": _figures(3, [1])}, commit_ms=300.0)
    now[0] = 55.0
    report = live.report("app")
    task = report.tasks["0_0"]
    assert task.process_total == 40 and report.counters["process-total"] == 43
    assert task.process_rate == 30 / SAMPLE_WINDOW_S  # the first batch is out of the window
    assert task.record_lateness_max == 7 and task.record_lateness_avg == 3.0
    assert task.dropped_records_total == 2 and task.dropped_by_reason == {"expired-window": 2}
    assert task.dropped_records_rate == 0.0
    assert task.stores == {"counts": (30, 3000)}  # the latest gauges
    assert report.commit_total == report.counters["batches"] == 2
    assert report.commit_latency_avg == report.commit_latency_max == 300.0
    assert report.busy_seconds == 0.4  # both batches
    assert "record-lateness-sum" not in report.counters
    now[0] = 200.0  # nothing in the window: rates 0, averages and maxima NaN, totals kept
    later = live.report("app")
    assert later.tasks["0_0"].process_rate == 0.0 and later.tasks["0_0"].process_total == 40
    assert math.isnan(later.tasks["0_0"].record_lateness_avg)
    assert math.isnan(later.commit_latency_max) and later.commit_rate == 0.0


def test_rates_over_a_young_app_divide_by_its_age():
    now = [0.0]
    live = LiveMetrics(clock=lambda: now[0])
    now[0] = 4.0
    live.record({"0_0": _figures(20, [0])}, commit_ms=10.0)
    assert live.report("app").tasks["0_0"].process_rate == 5.0
