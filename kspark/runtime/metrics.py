"""Figures of a running application or test driver: counters, maxima, minima and gauges."""

from __future__ import annotations

import json
from collections import Counter

DROPPED = "dropped-records-total"
#: the sum and number of record-lateness samples (Kafka Streams' ``record-lateness``)
LATENESS_SUM = "record-lateness-sum"
LATENESS_COUNT = "record-lateness-count"
LATENESS_MAX = "record-lateness-max"


class Metrics:
    """Named counters (``dropped-records-total`` plus one ``dropped-records-<reason>`` each),
    and figures that are not summed: maxima, minima and gauges (the latest value)."""

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.maxima: dict[str, float] = {}
        self.minima: dict[str, float] = {}
        self.gauges: dict[str, float] = {}

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def dropped(self, reason: str, n: int = 1) -> None:
        self.counters[DROPPED] += n
        self.counters[f"dropped-records-{reason}"] += n

    def observe_max(self, name: str, value: float) -> None:
        old = self.maxima.get(name)
        if old is None or value > old:
            self.maxima[name] = value

    def observe_min(self, name: str, value: float) -> None:
        old = self.minima.get(name)
        if old is None or value < old:
            self.minima[name] = value

    def merge(self, other: dict[str, int]) -> None:
        self.counters.update(other)

    def merge_all(self, other: Metrics) -> None:
        """Add ``other``'s counters, keep the larger maxima and smaller minima, take its
        gauges."""
        self.counters.update(other.counters)
        for name, value in other.maxima.items():
            self.observe_max(name, value)
        for name, value in other.minima.items():
            self.observe_min(name, value)
        self.gauges.update(other.gauges)

    def has_figures(self) -> bool:
        return bool(any(self.counters.values()) or self.maxima or self.minima or self.gauges)

    def to_json(self) -> bytes:
        """The figures as JSON (for a metrics row of the Spark wire format)."""
        return json.dumps({"counters": {k: v for k, v in self.counters.items() if v},
                           "max": self.maxima, "min": self.minima,
                           "gauges": self.gauges}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Metrics:
        parsed = json.loads(data)
        out = cls()
        out.counters.update(parsed.get("counters", {}))
        out.maxima.update(parsed.get("max", {}))
        out.minima.update(parsed.get("min", {}))
        out.gauges.update(parsed.get("gauges", {}))
        return out

    def snapshot(self) -> dict[str, int]:
        out = {DROPPED: 0, "process-total": 0, "punctuate-total": 0}
        out.update(self.counters)
        return out
