"""A running app's figures in Prometheus' text format (``prometheus_client``, the ``metrics``
extra), named as the Prometheus JMX exporter names Kafka Streams' metrics:
``kafka_streams_<group>_<metric>``, e.g. ``kafka_streams_stream_task_metrics_process_total``.
Figures of kspark's own start with ``kspark_``. docs/api.md "Metrics" lists them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kspark.errors import ConfigError
from kspark.spark.internals.live_metrics import MetricsReport

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

TASK = "kafka_streams_stream_task_metrics_"
THREAD = "kafka_streams_stream_thread_metrics_"
STATE = "kafka_streams_stream_state_metrics_"
NODE = "kafka_streams_stream_processor_node_metrics_"


class ReportsMetrics(Protocol):
    """What the endpoint serves: an app's :class:`MetricsReport`."""

    def metrics_report(self) -> MetricsReport: ...


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "serving metrics needs prometheus_client: pip install 'kspark[metrics]'") from None
    return prometheus_client


def families(report: MetricsReport) -> Iterator[Metric]:
    """The Prometheus metric families of ``report``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    app = [report.application_id]
    task_labels = ["application_id", "task_id"]

    def per_task(kind: type, name: str, doc: str, value: Any) -> Metric:
        family = kind(TASK + name, doc, labels=task_labels)
        for task_id, task in report.tasks.items():
            family.add_metric([*app, task_id], value(task))
        return family

    for kind, name, doc, of_task in (
            (CounterMetricFamily, "process", "Records processed.", lambda t: t.process_total),
            (GaugeMetricFamily, "process_rate", "Records processed per second.",
             lambda t: t.process_rate),
            (CounterMetricFamily, "punctuate", "Punctuator calls.", lambda t: t.punctuate_total),
            (GaugeMetricFamily, "punctuate_rate", "Punctuator calls per second.",
             lambda t: t.punctuate_rate),
            (CounterMetricFamily, "dropped_records", "Records dropped.",
             lambda t: t.dropped_records_total),
            (GaugeMetricFamily, "dropped_records_rate", "Records dropped per second.",
             lambda t: t.dropped_records_rate),
            (GaugeMetricFamily, "record_lateness_avg",
             "Average lateness of the records (ms behind stream time).",
             lambda t: t.record_lateness_avg),
            (GaugeMetricFamily, "record_lateness_max",
             "Largest lateness of a record (ms behind stream time).",
             lambda t: t.record_lateness_max)):
        yield per_task(kind, name, doc, of_task)
    dropped = CounterMetricFamily("kspark_dropped_records", "Records dropped, by reason.",
                                  labels=[*task_labels, "reason"])
    keys = GaugeMetricFamily(STATE + "estimate_num_keys", "Keys held by a state store.",
                             labels=[*task_labels, "store"])
    size = GaugeMetricFamily("kspark_state_store_bytes", "Bytes of a state store's buckets.",
                             labels=[*task_labels, "store"])
    for task_id, task in report.tasks.items():
        for reason, count in task.dropped_by_reason.items():
            dropped.add_metric([*app, task_id, reason], count)
        for store, (n, nbytes) in task.stores.items():
            keys.add_metric([*app, task_id, store], n)
            size.add_metric([*app, task_id, store], nbytes)
    yield from (dropped, keys, size)
    for name, doc, value in (
            ("commit", "Commits (micro-batches).", report.commit_total),
            ("commit_rate", "Commits per second.", report.commit_rate),
            ("commit_latency_avg", "Average micro-batch duration in ms.",
             report.commit_latency_avg),
            ("commit_latency_max", "Longest micro-batch duration in ms.",
             report.commit_latency_max),
            ("process", "Records processed.", report.counters.get("process-total", 0))):
        kind = CounterMetricFamily if name in ("commit", "process") else GaugeMetricFamily
        family = kind(THREAD + name, doc, labels=["application_id"])
        family.add_metric(app, value)
        yield family
    for stat, pick in (("avg", lambda lat: lat.avg), ("min", lambda lat: lat.min),
                       ("max", lambda lat: lat.max)):
        family = GaugeMetricFamily(
            NODE + f"record_e2e_latency_{stat}",
            f"End-to-end latency ({stat}) in ms of the records written to a topic.",
            labels=["application_id", "topic"])
        for topic, latency in report.e2e_latency.items():
            family.add_metric([*app, topic], pick(latency))
        yield family


@dataclass
class MetricsEndpoint:
    """A running HTTP endpoint serving an app's metrics; :meth:`close` stops it."""

    host: str
    port: int
    _server: Any

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(app: ReportsMetrics, port: int = 0, host: str = "0.0.0.0") -> MetricsEndpoint:
    """Serve ``app``'s figures on ``host:port`` (0: a free port) in a daemon thread."""
    client = _client()

    class _Collector:
        def collect(self) -> Iterator[Metric]:
            return families(app.metrics_report())

    registry = client.CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    server, _ = client.start_http_server(port, host, registry=registry)
    return MetricsEndpoint(host, server.server_port, server)
