"""Metrics of a running app (issue 39): ``metrics_report()`` per task with Kafka Streams'
figures (process total, dropped records by reason, record lateness, commits, state store
keys and bytes, end-to-end latency per sink topic), and the same figures scraped from the
Prometheus endpoint while the query runs, equal to ``app.metrics()``. The query starts
without pyspark's worker banners on standard error."""

from __future__ import annotations

import json
import math
import os
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kspark import Materialized, SessionWindows, StreamsBuilder, io, serdes
from kspark.spark import StreamsApp
from kspark.spark.internals.jvm_stderr import BANNER

pytestmark = pytest.mark.spark

S = serdes.String()
#: one partition, in file order: (key, timestamp); stream time before each record is the
#: largest timestamp so far, so the lateness of each is 0, 0, 2000, 10, 0, 0
ROWS = [("a", 1000), ("b", 5000), ("c", 3000), ("d", 4990), ("e", 6000), ("a", 6100)]
LATENESS = [0, 0, 2000, 10, 0, 0]


def _app(spark, app_dir: str) -> StreamsApp:
    builder = StreamsBuilder()
    (builder.stream("in", S, S).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 50))
        .count(Materialized("counts")).to_stream()
        .to("out", serdes.SessionWindowed(S), serdes.Long()))
    src = os.path.join(app_dir, "in")
    os.makedirs(src)
    with open(os.path.join(src, "a-0.jsonl"), "w") as f:
        f.writelines(json.dumps({"user": k, "page": "/p", "ts": t}) + "\n" for k, t in ROWS)
    topics = {"in": io.files(src, key_field="user", value_field="page", timestamp_field="ts"),
              "out": io.memory(serdes.SessionWindowed(S), serdes.Long())}
    return StreamsApp(builder.build(), "metrics-app", topics, spark=spark,
                      checkpoint_dir=os.path.join(app_dir, "ck"))


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_report_and_the_prometheus_endpoint_give_kafka_streams_figures(spark, app_dir,
                                                                           capfd):
    app = _app(spark, app_dir)
    app.start()
    try:
        app.process_all_available()
        # the query started quietly: pyspark's stateful worker banners stayed in the JVM
        assert BANNER.decode() not in capfd.readouterr().err
        with app.serve_metrics() as endpoint:
            scraped = _scrape(endpoint.url)
            report = app.metrics_report()
            counters = app.metrics()
    finally:
        app.stop()

    # the report: one task, every record counted, the late one dropped under its reason
    assert list(report.tasks) == ["0_0"]
    task = report.tasks["0_0"]
    assert task.process_total == counters["process-total"] == len(ROWS)
    assert task.dropped_by_reason == {"expired-window": 1} == {
        "expired-window": counters["dropped-records-expired-window"]}
    assert task.dropped_records_total == counters["dropped-records-total"] == 1
    assert task.record_lateness_max == max(LATENESS)
    assert task.record_lateness_avg == pytest.approx(sum(LATENESS) / len(LATENESS))
    keys, size = task.stores["counts"]
    assert keys == 5 and size > 0  # a holds two sessions, b, d and e one (c was late)
    assert report.commit_total == counters["batches"] >= 1
    assert report.commit_latency_max >= report.commit_latency_avg > 0
    e2e = report.e2e_latency["out"]
    assert 0 < e2e.min <= e2e.avg <= e2e.max and not math.isnan(e2e.avg)
    assert "e2e-latency-sum:out" not in counters and "record-lateness-sum" not in counters

    # the endpoint, scraped while the query runs: the same figures under Kafka Streams' names
    def value(name: str, **labels: str) -> float:
        return scraped[(name, tuple(sorted({"application_id": "metrics-app",
                                            **labels}.items())))]

    task_labels = {"task_id": "0_0"}
    assert value("kafka_streams_stream_task_metrics_process_total", **task_labels) == len(ROWS)
    assert value("kafka_streams_stream_task_metrics_dropped_records_total", **task_labels) == 1
    assert value("kspark_dropped_records_total", reason="expired-window", **task_labels) == 1
    assert value("kafka_streams_stream_task_metrics_record_lateness_max",
                 **task_labels) == max(LATENESS)
    assert value("kafka_streams_stream_state_metrics_estimate_num_keys", store="counts",
                 **task_labels) == keys
    assert value("kspark_state_store_bytes", store="counts", **task_labels) == size
    assert value("kafka_streams_stream_thread_metrics_commit_total") == counters["batches"]
    assert value("kafka_streams_stream_thread_metrics_process_total") == len(ROWS)
    assert value("kafka_streams_stream_processor_node_metrics_record_e2e_latency_max",
                 topic="out") >= e2e.max  # scraped a moment later
