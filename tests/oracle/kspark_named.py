"""The oracle's ``named`` shape built with kspark's DSL (``oracle/.../NamedShape.java``
mirrored; ``tests/oracle/README.md`` documents it): stateless operators, then the parts of
``parts``, every node of ``names`` named ``n-<node>`` and the stores of ``store_names``
named ``s-<store>``."""

from __future__ import annotations

from typing import Any

from kspark import (
    Joined,
    JoinWindows,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    serdes,
)
from kspark.dsl.api import KGroupedStream, KStream, KTable
from kspark.processor import FixedKeyProcessor, Processor

PARTS = ("stream_join", "stream_table_join", "global_join", "table_join", "fk_join", "windowed",
         "cogroup", "table_group", "to_table", "process")
TABLE_PARTS = ("stream_table_join", "table_join", "fk_join", "table_group")
#: every node the shape can name
NODES = ("source", "filter", "map_values", "select_key", "flat_map_values", "peek", "sink",
         "table", "utable", "global", "stream_join", "stream_table_join", "global_join",
         "table_join", "fk_join", "time_count", "suppress", "sliding_reduce",
         "session_aggregate", "session_count", "cogroup", "cogroup_time", "table_group",
         "table_count", "table_reduce",
         "to_table", "process_values", "process")
#: every part whose stores the shape can name (``table``, ``global``: the tables' own)
STORES = ("table", "global", "stream_join", "table_join", "fk_join", "windowed", "cogroup",
          "table_count", "table_reduce", "to_table")
KEYS = ("a", "b", "c")
LONG_RETENTION = 10_000_000


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def joiner(left: Any, right: Any) -> int:
    """``(l, r) -> (l or 0) * 100 + (r or 0)``, as the oracle's."""
    return (left or 0) * 100 + (right or 0)


class Forwarding(Processor):
    """Forwards every record as it is (the oracle's ``NamedShape.Forwarding``)."""

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Any) -> None:
        self.context.forward(record)


class FixedKeyForwarding(FixedKeyProcessor):
    """Forwards every record as it is (the oracle's ``NamedShape.FixedKeyForwarding``)."""

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Any) -> None:
        self.context.forward(record)


class _Named:
    def __init__(self, p: Any) -> None:
        self.names = set(p.get("names", []))
        self.parts = set(p.get("parts", []))
        self.stores = set(p.get("store_names", []))
        self.kinds = p.get("kinds") or {}
        self.rekey_right = p.get("rekey_right", False)
        unknown = self.parts - set(PARTS)
        if unknown:
            raise ValueError(f"unknown parts {sorted(unknown)} of the named shape")
        self.text, self.long = serdes.String(), serdes.Long()

    def name(self, node: str) -> str | None:
        return f"n-{node}" if node in self.names else None

    def kind(self, part: str) -> str:
        return self.kinds.get(part) or "inner"

    def kv(self, store: str) -> str | None:
        return f"s-{store}" if store in self.stores else None

    def window(self, store: str) -> Materialized:
        named = f"s-{store}" if "windowed" in self.stores else None
        return Materialized(named, retention=LONG_RETENTION)

    def out(self, stream: KStream) -> None:
        stream.to("out", self.text, self.long)

    def build(self) -> tuple[Topology, dict[str, serdes.Serde]]:
        builder = StreamsBuilder()
        text, long, name = self.text, self.long, self.name
        inputs: dict[str, serdes.Serde] = {"in": long}
        f = (builder.stream("in", text, long, name=name("source"))
             .filter(lambda k, v: v is not None, name=name("filter")))
        s = (f.map_values(lambda v: v * 2, name=name("map_values"))
             .select_key(lambda k, v: f"{_text(k)}!", name=name("select_key"))
             .flat_map_values(lambda v: [v, v + 1], name=name("flat_map_values"))
             .peek(lambda k, v: None, name=name("peek")))
        s.to("out", text, long, name=name("sink"))
        t = u = None
        if self.parts & set(TABLE_PARTS):
            t = builder.table("t", text, long, materialized=self.kv("table"), name=name("table"))
            inputs["t"] = long
        if self.parts & {"table_join", "fk_join"}:
            u = builder.table("u", text, long, name=name("utable"))
            inputs["u"] = long
        if "stream_join" in self.parts:
            self.stream_join(f)
        if "stream_table_join" in self.parts:
            keyed = f.select_key(lambda k, v: k)
            joined = Joined.with_(text, long, long)
            if "stream_table_join" in self.names:
                joined = joined.with_name("n-stream_table_join")
            join = keyed.left_join if self.kind("stream_table_join") == "left" else keyed.join
            self.out(join(t, joiner, joined))
        if "global_join" in self.parts:
            g = builder.global_table("g", text, long, materialized=self.kv("global"),
                                     name=name("global"))
            inputs["g"] = long
            gjoin = f.left_join if self.kind("global_join") == "left" else f.join
            self.out(gjoin(g, lambda k, v: k, joiner, name=name("global_join")))
        if "table_join" in self.parts:
            assert t is not None and u is not None
            kind = self.kind("table_join")
            tjoin = {"left": t.left_join, "outer": t.outer_join}.get(kind, t.join)
            self.out(tjoin(u, joiner, self.kv("table_join"), name=name("table_join"))
                     .to_stream())
        if "fk_join" in self.parts:
            assert t is not None and u is not None
            fjoin = u.left_join if self.kind("fk_join") == "left" else u.join
            self.out(fjoin(t, joiner, self.kv("fk_join"),
                           foreign_key_extractor=lambda v: KEYS[v % 3],
                           name=name("fk_join")).to_stream())
        if "windowed" in self.parts:
            self.windowed(f.group_by_key(text, long))
        if "cogroup" in self.parts:
            (f.group_by_key(text, long).cogroup(lambda k, v, a: a + v)
             .aggregate(lambda: 0, self.kv("cogroup"), name=name("cogroup"))
             .to_stream().to("out", text, long))
            self._windowed_out(f.group_by_key(text, long).cogroup(lambda k, v, a: a + v)
                               .windowed_by(TimeWindows.of_size_with_no_grace(10))
                               .aggregate(lambda: 0, self.window("cogroup_time"),
                                          name=name("cogroup_time")))
        if "table_group" in self.parts:
            assert t is not None
            grouped = t.group_by(lambda k, v: (f"g{v % 2}", v), text, long,
                                 name=name("table_group"))
            self.out(grouped.count(self.kv("table_count"), name=name("table_count")).to_stream())
            self.out(grouped.reduce(lambda a, b: a + b, lambda a, b: a - b,
                                    self.kv("table_reduce"), name=name("table_reduce"))
                     .to_stream())
        if "process" in self.parts:
            (f.process_values(FixedKeyForwarding, name=name("process_values"))
             .process(Forwarding, name=name("process")).to("out", text, long))
        if "to_table" in self.parts:
            self.out(f.select_key(lambda k, v: k)
                     .to_table(self.kv("to_table"), name=name("to_table")).to_stream())
        return builder.build(), inputs

    def stream_join(self, f: KStream) -> None:
        """``f`` joined with itself, one side (the right one with ``rekey_right``) through
        ``select_key``: repartitioned."""
        sj = StreamJoined.with_(self.text, self.long, self.long)
        if "stream_join" in self.names:
            sj = sj.with_name("n-stream_join")
        if "stream_join" in self.stores:
            sj = sj.with_store_name("s-stream_join")
        rekeyed = f.select_key(lambda k, v: k)
        left, right = (f, rekeyed) if self.rekey_right else (rekeyed, f)
        windows = JoinWindows.of_time_difference_with_no_grace(5)
        kind = self.kind("stream_join")
        join = {"left": left.left_join, "outer": left.outer_join}.get(kind, left.join)
        self.out(join(right, joiner, windows, sj))

    def windowed(self, g: KGroupedStream) -> None:
        name = self.name
        counts = (g.windowed_by(TimeWindows.of_size_with_no_grace(10))
                  .count(self.window("time"), name=name("time_count")))
        suppressed = Suppressed.until_window_closes()
        if "suppress" in self.names:
            suppressed = suppressed.with_name("n-suppress")
        self._windowed_out(counts.suppress(suppressed))
        self._windowed_out(g.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
                           .reduce(lambda a, b: a + b, self.window("sliding"),
                                   name=name("sliding_reduce")))
        self._windowed_out(g.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
                           .aggregate(lambda: 0, lambda k, v, a: a + v, lambda k, a, b: a + b,
                                      self.window("session"), name=name("session_aggregate")))
        self._windowed_out(g.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
                           .count(self.window("session_count"), name=name("session_count")))

    def _windowed_out(self, table: KTable) -> None:
        self.out(table.to_stream().map(lambda wk, v: (f"{wk.key}@{wk.window.start}", v)))


def build_named(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    """The ``named`` shape's topology and its input topics' value serdes."""
    return _Named(p).build()
