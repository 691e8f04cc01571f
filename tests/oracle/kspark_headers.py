"""The ``headers`` shape built with kspark's DSL (``oracle/.../HeaderShape.java`` mirrored;
``tests/oracle/README.md`` documents it): a random pipeline of stateless operators, one
stateful tail and value-only operators after it, to compare the headers of every result."""

from __future__ import annotations

from typing import Any

from kspark import (
    BufferConfig,
    EmitStrategy,
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
from kspark.processor import FixedKeyProcessor, FixedKeyRecord

PARAMS = {"source", "source_caching", "pre", "tail", "agg", "caching", "table_caching",
          "windows", "size", "advance", "grace", "emit", "suppress", "kind", "versioned", "post"}
#: the operators that keep the key (``post``, after a windowed tail too)
VALUE_OPS = ("filter", "map_values", "flat_map_values", "h_read", "h_set", "h_add", "h_remove")
#: every operator of ``pre``
OPS = (*VALUE_OPS, "map", "flat_map", "repartition")
TAILS = ("none", "aggregate", "table_aggregate", "windowed", "stream_table_join", "stream_join")
#: the retention of a windowed tail's store: nothing expires within a case
RETENTION = 10_000_000

TEXT, LONG = serdes.String(), serdes.Long()


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


class HeaderOp(FixedKeyProcessor):
    """The oracle's ``HeaderShape.HeaderOp``: ``h_read`` adds to a value 1000 per header, and
    for the last header named "h" 7 (a null value) or 100 + its length; ``h_set`` replaces the
    headers by one, "s", the value's text (``None`` for a null value); ``h_add`` adds "h" with
    the value's text ("null" for a null value); ``h_remove`` removes every "h"."""

    def __init__(self, op: str) -> None:
        self.op = op

    def process(self, record: FixedKeyRecord) -> None:
        v, headers = record.value, record.headers
        if self.op == "h_read":
            last = next((value for name, value in reversed(headers) if name == "h"), ())
            read = 1000 * len(headers) + (0 if last == () else 7 if last is None
                                          else 100 + len(last))
            self.context.forward(record.with_value(None if v is None else v + read))
        elif self.op == "h_set":
            self.context.forward(record.with_headers(
                [("s", None if v is None else str(v).encode())]))
        elif self.op == "h_add":
            self.context.forward(record.with_headers([*headers, ("h", _text(v).encode())]))
        else:
            self.context.forward(record.with_headers([h for h in headers if h[0] != "h"]))


def apply(stream: Any, op: str) -> Any:
    """One operator (``HeaderShape.apply``)."""
    if op == "filter":
        return stream.filter(lambda k, v: v is None or v % 3 != 0)
    if op == "map_values":
        return stream.map_values(lambda v: None if v is None else v + 1)
    if op == "flat_map_values":
        return stream.flat_map_values(lambda v: [] if v is None else [v, v + 100])
    if op == "map":
        return stream.map(lambda k, v: (k if v is None else f"{_text(k)}{v % 2}", v))
    if op == "flat_map":
        return stream.flat_map(lambda k, v: [(k, v)] if v is None
                               else [(k, v), (f"{_text(k)}x", v + 10)])
    if op == "repartition":
        return stream.repartition(key_serde=TEXT, value_serde=LONG)
    if op in VALUE_OPS:
        return stream.process_values(lambda: HeaderOp(op))
    raise ValueError(f"unknown operator {op!r} (known: {list(OPS)})")


def _kv(p: Any, name: str, caching: str) -> Materialized:
    return Materialized(name, caching=p.get(caching, True), key_serde=TEXT, value_serde=LONG)


def _suppress(p: Any, table: Any) -> Any:
    s = p.get("suppress")
    if s is None:
        return table
    if s["type"] == "window_close":
        return table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    buffer = (BufferConfig.unbounded() if s.get("max_records") is None
              else BufferConfig.max_records(s["max_records"]))
    return table.suppress(Suppressed.until_time_limit(s["limit"], buffer))


def _aggregate(p: Any, grouped: Any) -> Any:
    m = _kv(p, "store", "caching")
    if p.get("agg") == "count":
        return grouped.count(m)
    if p.get("agg") == "sum":
        return grouped.aggregate(lambda: 0, lambda k, v, agg: agg + v, m)
    return grouped.reduce(lambda a, b: a + b, m)


def _table_aggregate(p: Any, table: Any) -> Any:
    grouped = table.group_by(lambda k, v: (f"g{v % 2}", v), TEXT, LONG)
    m = _kv(p, "store", "caching")
    if p.get("agg") == "count":
        return grouped.count(m)
    if p.get("agg") == "sum":
        return grouped.aggregate(lambda: 0, lambda k, v, agg: agg + v,
                                 lambda k, v, agg: agg - v, m)
    return grouped.reduce(lambda a, b: a + b, lambda a, b: a - b, m)


def out_key_serde(p: Any) -> serdes.Serde:
    """The key serde of "out": windowed after a windowed tail."""
    if p.get("tail") != "windowed":
        return TEXT
    if p.get("windows") == "session":
        return serdes.SessionWindowed(TEXT)
    return serdes.TimeWindowed(TEXT, p.get("size"))


def _windowed(p: Any, stream: Any) -> Any:
    """The windowed aggregation's table."""
    size, grace, kind = p.get("size"), p.get("grace", 0), p.get("windows")
    if kind == "session":
        windowed = stream.group_by_key(TEXT, LONG).windowed_by(
            SessionWindows.of_inactivity_gap_and_grace(size, grace))
    else:
        windows: Any = (TimeWindows.of_size_and_grace(size, grace) if kind == "time"
                        else SlidingWindows.of_time_difference_and_grace(size, grace))
        if p.get("advance") is not None:
            windows = windows.advance_by(p.get("advance"))
        windowed = stream.group_by_key(TEXT, LONG).windowed_by(windows)
    if p.get("emit", "update") == "close":
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    m = Materialized("store", retention=RETENTION, caching=p.get("caching", True),
                     key_serde=TEXT, value_serde=LONG)
    op = p.get("agg")
    if op == "count":
        return windowed.count(m)
    if op == "sum":
        add = lambda k, v, agg: agg if v is None else agg + v  # noqa: E731
        if kind == "session":
            return windowed.aggregate(lambda: 0, add, lambda k, a, b: a + b, m)
        return windowed.aggregate(lambda: 0, add, m)
    return windowed.reduce(lambda a, b: a if b is None else a + b, m)


def _joiner(left: Any, right: Any) -> int:
    return (left or 0) * 100 + (right or 0)


def build_headers(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    """The shape's topology and its input topics' value serdes (keys are strings)."""
    builder = StreamsBuilder()
    tail, pre = p.get("tail", "none"), p.get("pre", [])
    source_table = None
    if p.get("source", "stream") == "table":
        source_table = builder.table("in", TEXT, LONG, _kv(p, "source", "source_caching"))
        # a table aggregation of the source table itself when nothing comes between
        stream = None if tail == "table_aggregate" and not pre else source_table.to_stream()
    else:
        stream = builder.stream("in", TEXT, LONG)
    for op in pre:
        stream = apply(stream, op)
    inputs = {"in": LONG}
    if tail == "aggregate":
        out = _suppress(p, _aggregate(p, stream.group_by_key(TEXT, LONG))).to_stream()
    elif tail == "table_aggregate":
        table = source_table if stream is None else stream.to_table(
            _kv(p, "table", "table_caching"))
        out = _suppress(p, _table_aggregate(p, table)).to_stream()
    elif tail == "windowed":
        out = _suppress(p, _windowed(p, stream)).to_stream()
    elif tail == "stream_table_join":
        # "versioned": ms of history in a versioned store, "grace": the join's grace buffer
        table = builder.table("t", TEXT, LONG, Materialized(
            "table", caching=p.get("table_caching", True), key_serde=TEXT, value_serde=LONG,
            versioned_history=p.get("versioned")))
        joined = Joined.with_(TEXT, LONG, LONG)
        if p.get("grace") is not None:
            joined = joined.with_grace_period(p.get("grace"))
        out = (stream.join(table, _joiner, joined) if p.get("kind") == "inner"
               else stream.left_join(table, _joiner, joined))
        inputs["t"] = LONG
    elif tail == "stream_join":
        other = builder.stream("s", TEXT, LONG)
        windows = JoinWindows.of_time_difference_and_grace(p.get("size"), p.get("grace", 0))
        method = {"inner": stream.join, "left": stream.left_join,
                  "outer": stream.outer_join}[p.get("kind")]
        out = method(other, _joiner, windows, StreamJoined.with_(TEXT, LONG, LONG))
        inputs["s"] = LONG
    else:
        out = stream
    for op in p.get("post", []):
        out = apply(out, op)
    out.to("out", out_key_serde(p), LONG)
    return builder.build(), inputs
