"""The oracle's shapes of the DSL's stateless operators built with kspark's DSL
(``oracle/.../Dsl.java`` mirrored; ``tests/oracle/README.md`` documents them)."""

from __future__ import annotations

from typing import Any

from kspark_headers import PARAMS as HEADER_PARAMS
from kspark_headers import build_headers
from kspark_headers import out_key_serde as header_key_serde
from kspark_named import build_named
from user_functions import Misbehaving, UserFunctionError

from kspark import (
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    serdes,
)
from kspark.processor import FixedKeyProcessor, FixedKeyRecord, ValueTransformerWithKey

#: shape -> its parameters (besides the common ones)
DSL_SHAPES: dict[str, set[str]] = {"branch": {"prefix", "branches", "default"},
                                   "repartition": {"rekey", "name", "partitions", "caching",
                                                   "none_on", "int_key_on", "raise_on"},
                                   "process_values": {"rekey", "caching", "raise_on"},
                                   "timestamp_extractor": {"grace"},
                                   "cogroup": {"rekey_b", "named", "caching", "windows", "grace",
                                               "size", "retention", "none_on", "raise_on"},
                                   "named": {"names", "parts", "kinds", "store_names",
                                             "rekey_right"},
                                   "grouping": {"by", "grouped_name", "caching", "counts_named",
                                                "agg_names", "int_key_on"},
                                   "table_ops": {"source", "source_named", "caching", "operation",
                                                 "op_materialized", "op_caching", "op_unnamed",
                                                 "op_named", "none_on", "raise_on"},
                                   "headers": HEADER_PARAMS}

CHAINS = ("none", "map", "consume", "drop")


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def predicate(pred: dict[str, Any]) -> Any:
    """A branch's predicate: ``{"mod": m, "rem": r}`` (a value v with ``v mod m == r``, floored
    as Java's ``Math.floorMod``), ``{"null": true}`` (a null value) or ``{"key": k}``; with
    ``"raise_on": v`` it fails on the value v before it tests."""
    test = _test(pred)
    raise_on = pred.get("raise_on")
    if raise_on is None:
        return test
    return lambda k, v: Misbehaving(None, raise_on).returns_none(v) or test(k, v)


def _test(pred: dict[str, Any]) -> Any:
    if "mod" in pred:
        m, r = pred["mod"], pred.get("rem", 0)
        return lambda k, v: v is not None and v % m == r
    if "null" in pred:
        return lambda k, v: v is None
    if "key" in pred:
        key = pred["key"]
        return lambda k, v: k == key
    raise ValueError(f"unknown branch predicate {pred!r} (known: mod/rem, null, key)")


def _chain(spec: dict[str, Any]) -> Any:
    chain = spec.get("chain") or "none"
    if chain not in CHAINS:
        raise ValueError(f"unknown branch chain {chain!r} (known: {list(CHAINS)})")
    if chain == "map":
        return lambda s: s.map_values(lambda v: None if v is None else v * 10)
    if chain == "consume":
        def consume(s: Any) -> None:
            s.map_values(lambda v: f"consumed:{_text(v)}").to("out", serdes.String(),
                                                                serdes.String())
        return consume
    if chain == "drop":
        return lambda s: None
    return None


def _branch(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    split = builder.stream("in", serdes.String(), serdes.Long()).split(p.get("prefix"))
    for b in p.get("branches", []):
        split = split.branch(predicate(b["pred"]), name=b.get("name"), chain=_chain(b))
    default = p.get("default")
    result = (split.no_default_branch() if default is None
              else split.default_branch(name=default.get("name"), chain=_chain(default)))
    for name, stream in sorted(result.items()):
        stream.map_values(lambda v, name=name: f"{name}:{_text(v)}").to(
            "out", serdes.String(), serdes.String())
    return builder.build(), {"in": serdes.Long()}


def _repartition(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    stream = builder.stream("in", serdes.String(), serdes.Long())
    # the selector returns None on "none_on", the value itself (an int, not a str) on
    # "int_key_on" and fails on "raise_on"
    misbehaving, int_key_on = Misbehaving(p.get("none_on"), p.get("raise_on")), p.get("int_key_on")

    def selector(k: Any, v: Any) -> Any:
        if v is None or misbehaving.returns_none(v):
            return None
        return v if v == int_key_on else f"{_text(k)}{v % 2}"

    if p.get("rekey", False):
        stream = stream.select_key(selector)
    (stream.repartition(name=p.get("name"), partitions=p.get("partitions"),
                        key_serde=serdes.String(), value_serde=serdes.Long())
     .group_by_key()
     .count(Materialized("counts", caching=p.get("caching", True)))
     .to_stream().to("out", serdes.String(), serdes.Long()))
    return builder.build(), {"in": serdes.Long()}


class Doubling(FixedKeyProcessor):
    """Forwards ``v * 2`` at the record's timestamp + 1, then fails if ``v`` is ``raise_on``,
    and for an odd value also forwards ``v`` itself; a null value as is (the oracle's
    ``Dsl.Doubling``)."""

    def __init__(self, raise_on: int | None = None) -> None:
        self.raise_on = raise_on

    def process(self, record: FixedKeyRecord) -> None:
        v = record.value
        if v is None:
            self.context.forward(record)
            return
        self.context.forward(record.with_value(v * 2).with_timestamp(record.timestamp + 1))
        if v == self.raise_on:
            raise UserFunctionError(f"user function fails on {v}")
        if v % 2 == 1:
            self.context.forward(record)


def _process_values(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    stream = builder.stream("in", serdes.String(), serdes.Long())
    if p.get("rekey", False):
        stream = stream.select_key(lambda k, v: None if v is None else f"{_text(k)}{v % 2}")
    (stream.process_values(lambda: Doubling(p.get("raise_on")))
     .group_by_key(serdes.String(), serdes.Long())
     .count(Materialized("counts", caching=p.get("caching", True)))
     .to_stream().to("out", serdes.String(), serdes.Long()))
    return builder.build(), {"in": serdes.Long()}


def value_or_partition_time(record: Any, partition_time: int) -> int:
    """The timestamp of the oracle's ``ValueOrPartitionTime``: the value, or the partition time
    for a null value."""
    return partition_time if record.value is None else int(record.value)


def _timestamp_extractor(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    (builder.stream("in", serdes.String(), serdes.Long(),
                    timestamp_extractor=value_or_partition_time)
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, p.get("grace", 0)))
     .count(Materialized("store", caching=False))
     .to_stream().to("out", serdes.TimeWindowed(serdes.String(), 10), serdes.Long()))
    return builder.build(), {"in": serdes.Long()}


#: the default retention of a windowed cogroup's store (the oracle's): nothing expires within a
#: case
WINDOWED_RETENTION = 10_000_000


def _cogroup(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    text, long = serdes.String(), serdes.Long()
    a = builder.stream("a", text, long).group_by_key(text, long)
    b = builder.stream("b", text, long)
    if p.get("rekey_b", False):
        b = b.select_key(lambda k, v: k)
    windows, grace = p.get("windows", "none"), p.get("grace", 0)
    size = p.get("size", 10)  # window size, time difference or inactivity gap
    m = Materialized("store" if p.get("named", True) else None, caching=p.get("caching", True),
                     key_serde=text, value_serde=long,
                     retention=None if windows == "none"
                     else p.get("retention", WINDOWED_RETENTION))
    # windowed aggregations pass null values on (a plain one drops them)
    misbehaving = Misbehaving(p.get("none_on"), p.get("raise_on"))  # stream a's aggregator
    cogrouped = (a.cogroup(lambda k, v, agg: None if misbehaving.returns_none(v)
                           else agg if v is None else agg + v)
                 .cogroup(b.group_by_key(text, long),
                          lambda k, v, agg: agg + 1000 if v is None else agg * 2 - v))
    if windows == "none":
        cogrouped.aggregate(lambda: 0, m).to_stream().to("out", text, long)
    elif windows == "session":
        (cogrouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(size, grace))
         .aggregate(lambda: 0, lambda k, x, y: x + y, m)
         .to_stream().to("out", serdes.SessionWindowed(text), long))
    else:
        w = (TimeWindows.of_size_and_grace(size, grace) if windows == "time"
             else SlidingWindows.of_time_difference_and_grace(size, grace))
        (cogrouped.windowed_by(w).aggregate(lambda: 0, m)
         .to_stream().to("out", serdes.TimeWindowed(text, size), long))
    return builder.build(), {"a": long, "b": long}


def _even(k: Any, v: Any) -> bool:
    return v is not None and v % 2 == 0


class Tagged(ValueTransformerWithKey):
    """The oracle's ``Dsl.TAGGED``: a deleted row of key ``a`` becomes -1, a value divisible by
    3 deletes the row, others get 100 added."""

    def transform(self, key: Any, value: Any) -> Any:
        if value is None:
            return -1 if key == "a" else None
        return None if value % 3 == 0 else value + 100


def _table_ops(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    text, long = serdes.String(), serdes.Long()
    sm = Materialized("source" if p.get("source_named", False) else None,
                      caching=p.get("caching", True), key_serde=text, value_serde=long)
    table = (builder.table("in", text, long, sm) if p.get("source", "table") == "table"
             else builder.stream("in", text, long).to_table(sm))
    rm = (Materialized(None if p.get("op_unnamed", False) else "result",
                       caching=p.get("op_caching", True), key_serde=text, value_serde=long)
          if p.get("op_materialized", False) else None)
    op = p.get("operation")
    named = p.get("op_named", False)
    name = "n-op" if named else None
    if op == "filter":
        result = table.filter(_even, rm, name=name)
    elif op == "filter_not":
        result = table.filter_not(_even, rm, name=name)
    elif op == "map_values":
        misbehaving = Misbehaving(p.get("none_on"), p.get("raise_on"))
        result = table.map_values(lambda v: None if misbehaving.returns_none(v) else v * 10, rm,
                                  name=name)
    elif op == "transform_values":
        result = table.transform_values(Tagged, materialized=rm, name=name)
    else:
        raise ValueError(f"unknown op {op!r} (known: filter, filter_not, map_values, "
                         f"transform_values)")
    result.to_stream(name="n-to-stream" if named else None).to("out", text, long)
    return builder.build(), {"in": long}


def _grouping(p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    builder = StreamsBuilder()
    text, long = serdes.String(), serdes.Long()
    stream = builder.stream("in", text, long)

    int_key_on = p.get("int_key_on")  # the value itself as the key: an int, not a str

    def key(k: Any, v: Any) -> Any:
        return None if v is None else v if v == int_key_on else f"{_text(k)}{v % 2}"

    name = p.get("grouped_name")
    grouped = (stream.group_by(key, text, long, name=name) if p.get("by") == "group_by"
               else stream.select_key(key).group_by_key(text, long, name=name))
    caching, names = p.get("caching", True), p.get("agg_names", False)
    counts = Materialized("counts" if p.get("counts_named", True) else None, caching=caching)
    (grouped.count(counts, name="n-count" if names else None)
     .to_stream().to("out", text, long))
    (grouped.reduce(lambda a, b: a + b, Materialized("sums", caching=caching),
                    name="n-reduce" if names else None)
     .to_stream().to("out", text, long))
    return builder.build(), {"in": long}


def out_key_serde(shape: str, p: Any) -> serdes.Serde:
    """The key serde of "out" for a DSL shape."""
    if shape == "headers":
        return header_key_serde(p)
    windows = p.get("windows", "none") if shape == "cogroup" else "none"
    if shape == "timestamp_extractor" or windows in ("time", "sliding"):
        return serdes.TimeWindowed(serdes.String(), p.get("size", 10))
    if windows == "session":
        return serdes.SessionWindowed(serdes.String())
    return serdes.String()


#: shape -> (its builder, the value serde of "out"; keys are strings)
BUILDERS = {"branch": (_branch, serdes.String()), "repartition": (_repartition, serdes.Long()),
            "process_values": (_process_values, serdes.Long()),
            "timestamp_extractor": (_timestamp_extractor, serdes.Long()),
            "cogroup": (_cogroup, serdes.Long()),
            "table_ops": (_table_ops, serdes.Long()),
            "named": (build_named, serdes.Long()),
            "grouping": (_grouping, serdes.Long()),
            "headers": (build_headers, serdes.Long())}
#: shape -> its stores by kind, as the oracle dumps them
STORES = {"repartition": {"counts": "kv_ts"}, "process_values": {"counts": "kv_ts"},
          "grouping": {"sums": "kv_ts"}}


def build_dsl(shape: str, p: Any) -> tuple[Topology, dict[str, serdes.Serde]]:
    """The shape's topology and its input topics' value serdes (keys are strings)."""
    if shape not in BUILDERS:
        raise ValueError(f"unknown DSL shape {shape!r}")
    return BUILDERS[shape][0](p)
