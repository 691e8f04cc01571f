"""A running app's figures on the driver: totals since start, per task, and Kafka Streams'
windowed rates, averages and maxima over the micro-batches of the last sample window."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kspark.runtime.metrics import DROPPED, LATENESS_COUNT, LATENESS_MAX, LATENESS_SUM, Metrics

#: Kafka Streams' default ``metrics.sample.window.ms``
SAMPLE_WINDOW_S = 30.0
_DROPPED_PREFIX = "dropped-records-"


@dataclass(frozen=True)
class TaskReport:
    """One task's figures (Kafka Streams' ``stream-task-metrics`` and its stores')."""

    process_total: int
    process_rate: float
    punctuate_total: int
    punctuate_rate: float
    dropped_records_total: int
    dropped_records_rate: float
    #: dropped records by reason (``late``, ``deserialization``, ...)
    dropped_by_reason: dict[str, int]
    record_lateness_avg: float
    record_lateness_max: float
    #: store name -> (estimated number of keys, bytes of its buckets)
    stores: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class LatencyReport:
    avg: float
    min: float
    max: float


@dataclass(frozen=True)
class MetricsReport:
    """An app's figures at one moment (:meth:`StreamsApp.metrics_report`); windowed figures
    (rates, averages, maxima) cover the last :data:`SAMPLE_WINDOW_S` seconds, NaN when no
    micro-batch ran then."""

    application_id: str
    #: the app-level counters of :meth:`StreamsApp.metrics`
    counters: dict[str, int]
    tasks: dict[str, TaskReport]
    commit_total: int
    commit_rate: float
    commit_latency_avg: float
    commit_latency_max: float
    #: per sink topic: now minus the record's timestamp when written, in ms
    e2e_latency: dict[str, LatencyReport] = field(default_factory=dict)
    #: seconds spent in micro-batches since start (computing, writing, committing)
    busy_seconds: float = 0.0


def _avg(total: float, count: float) -> float:
    return total / count if count else math.nan


@dataclass
class _Sample:
    at: float
    figures: dict[str, Metrics]
    commit_ms: float


class LiveMetrics:
    """Figures of the micro-batches run so far; :meth:`record` is called once per batch."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.totals = Metrics()
        self.tasks: dict[str, Metrics] = {}
        self.batches = 0
        self.busy_ms = 0.0
        self._clock = clock
        self._started = clock()
        self._recent: deque[_Sample] = deque()

    def record(self, figures: dict[str, Metrics], commit_ms: float) -> None:
        """One micro-batch's figures by task id (``""``: not a task's) and its duration."""
        now = self._clock()
        for task, metrics in figures.items():
            self.totals.merge_all(metrics)
            if task:
                self.tasks.setdefault(task, Metrics()).merge_all(metrics)
        self.batches += 1
        self.busy_ms += commit_ms
        self._recent.append(_Sample(now, figures, commit_ms))
        while self._recent and self._recent[0].at < now - SAMPLE_WINDOW_S:
            self._recent.popleft()

    def report(self, application_id: str) -> MetricsReport:
        now = self._clock()
        recent = [s for s in self._recent if s.at >= now - SAMPLE_WINDOW_S]
        span = max(min(SAMPLE_WINDOW_S, now - self._started), 1e-3)
        counters = {k: v for k, v in self.totals.snapshot().items()
                    if ":" not in k and k not in (LATENESS_SUM, LATENESS_COUNT)}
        counters["batches"] = self.batches
        tasks = {task: self._task_report(task, metrics, recent, span)
                 for task, metrics in sorted(self.tasks.items())}
        commits = [s.commit_ms for s in recent]
        return MetricsReport(
            application_id, counters, tasks, self.batches, len(commits) / span,
            _avg(sum(commits), len(commits)), max(commits, default=math.nan),
            self._e2e(recent), self.busy_ms / 1000)

    @staticmethod
    def _task_report(task: str, totals: Metrics, recent: list[_Sample],
                     span: float) -> TaskReport:
        window = Metrics()
        for sample in recent:
            if task in sample.figures:
                window.merge_all(sample.figures[task])
        c, w = totals.counters, window.counters
        stores: dict[str, tuple[int, int]] = {}
        for name, value in totals.gauges.items():
            kind, _, store = name.partition(":")
            keys, size = stores.get(store, (0, 0))
            if kind == "estimate-num-keys":
                stores[store] = (int(value), size)
            elif kind == "state-bytes":
                stores[store] = (keys, int(value))
        return TaskReport(
            c["process-total"], w["process-total"] / span,
            c["punctuate-total"], w["punctuate-total"] / span,
            c[DROPPED], w[DROPPED] / span,
            {k[len(_DROPPED_PREFIX):]: v for k, v in sorted(c.items())
             if k.startswith(_DROPPED_PREFIX) and k != DROPPED},
            _avg(w[LATENESS_SUM], w[LATENESS_COUNT]), window.maxima.get(LATENESS_MAX, math.nan),
            stores)

    @staticmethod
    def _e2e(recent: Iterable[_Sample]) -> dict[str, LatencyReport]:
        window = Metrics()
        for sample in recent:
            for metrics in sample.figures.values():
                window.merge_all(metrics)
        out = {}
        for name, high in sorted(window.maxima.items()):
            if name.startswith("e2e-latency:"):
                topic = name.partition(":")[2]
                out[topic] = LatencyReport(
                    _avg(window.counters[f"e2e-latency-sum:{topic}"],
                         window.counters[f"e2e-latency-count:{topic}"]),
                    window.minima[name], high)
        return out
