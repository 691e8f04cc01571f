"""The oracle's ``punctuator`` shape on kspark's side: ``Oracle.SumProcessor`` with its store,
through kspark's Processor API (``tests/oracle/README.md``)."""

from __future__ import annotations

from typing import Any

from user_functions import UserFunctionError

from kspark import Processor, PunctuationType, Stores, Topology, serdes
from kspark.records import Record

#: the shape's parameters (besides the common ones)
PUNCTUATOR_PARAMS = {"stream_interval", "wall_interval", "stream_cancel_after",
                     "wall_cancel_after", "caching", "stream_raise_at", "wall_raise_at"}


class SumProcessor(Processor):
    """The oracle's SumProcessor: a running sum per key in "store", forwarded per record;
    punctuators forward ("@stream" / "@wall", total of all sums) at the punctuation time,
    cancel themselves after ``*_cancel_after`` fires and fail at their ``*_raise_at``-th fire
    (before forwarding)."""

    def __init__(self, stream_interval: int | None, wall_interval: int | None,
                 stream_cancel_after: int | None, wall_cancel_after: int | None,
                 stream_raise_at: int | None, wall_raise_at: int | None) -> None:
        self.stream_interval, self.wall_interval = stream_interval, wall_interval
        self.cancel_after = {"@stream": stream_cancel_after, "@wall": wall_cancel_after}
        self.raise_at = {"@stream": stream_raise_at, "@wall": wall_raise_at}
        self.fires = {"@stream": 0, "@wall": 0}
        self.schedules: dict[str, Any] = {}

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("store")
        for name, interval, kind in (("@stream", self.stream_interval,
                                      PunctuationType.STREAM_TIME),
                                     ("@wall", self.wall_interval,
                                      PunctuationType.WALL_CLOCK_TIME)):
            if interval is not None:
                self.schedules[name] = context.schedule(
                    interval, kind, lambda ts, name=name: self._punctuate(name, ts))

    def _punctuate(self, name: str, ts: int) -> None:
        self.fires[name] += 1
        if self.fires[name] == self.raise_at[name]:
            raise UserFunctionError(f"{name} punctuation {self.fires[name]}")
        total = sum(kv.value for kv in self.store.all())
        self.context.forward(Record(name, total, ts))
        cancel_after = self.cancel_after[name]
        if cancel_after is not None and self.fires[name] >= cancel_after:
            self.schedules[name].cancel()

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        if record.value is None:
            self.store.delete(record.key)
            self.context.forward(record.with_value(None))
            return
        old = self.store.get(record.key)
        total = (0 if old is None else old) + record.value
        self.store.put(record.key, total)
        self.context.forward(record.with_value(total))


def build_punctuator(p: Any) -> tuple[Topology, serdes.Serde, serdes.Serde, serdes.Serde,
                                      dict[str, str]]:
    """The shape's topology, the value serde of "in", the serdes of "out" and its stores."""
    args = (p.get("stream_interval"), p.get("wall_interval"), p.get("stream_cancel_after"),
            p.get("wall_cancel_after"), p.get("stream_raise_at"), p.get("wall_raise_at"))
    topology = Topology()
    topology.add_source("source", "in", key_serde=serdes.String(), value_serde=serdes.Long())
    topology.add_processor("sum", lambda: SumProcessor(*args), "source")
    topology.add_state_store(Stores.key_value_store("store", key_serde=serdes.String(),
                                                    value_serde=serdes.Long(),
                                                    caching=p.get("caching", False)), "sum")
    topology.add_sink("sink", "out", "sum", key_serde=serdes.String(), value_serde=serdes.Long())
    return topology, serdes.Long(), serdes.String(), serdes.Long(), {"store": "kv"}
