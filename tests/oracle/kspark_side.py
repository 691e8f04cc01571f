"""The oracle's shapes built with kspark's DSL / Processor API and run through kspark's
``TopologyTestDriver``, with output in the oracle's normalised form (see ``oracle.py``).

Every shape, parameter and user function here mirrors ``oracle/src/main/java/kspark/oracle/
Oracle.java``; ``tests/oracle/README.md`` documents them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from kspark_dsl import BUILDERS as DSL_BUILDERS
from kspark_dsl import DSL_SHAPES, build_dsl, out_key_serde
from kspark_dsl import STORES as DSL_STORES
from kspark_joins import JOIN_SHAPES, build_join
from kspark_punctuator import PUNCTUATOR_PARAMS, build_punctuator
from user_functions import Misbehaving, empty, failure_line, group, merge, zero

from kspark import (
    BufferConfig,
    EmitStrategy,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamsError,
    Suppressed,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Windowed,
    serdes,
)
from kspark.topology.nodes import ProcessorNode

COMMON = {"store_type", "emit_interval"}  # oracle-only settings, ignored here
SHAPES: dict[str, set[str]] = {
    "session": {"op", "gap", "grace", "emit", "caching", "suppress", "retention", "none_on",
                "raise_on", "store_named", "merger_none_on", "merger_raise_on"},
    "time_window": {"op", "size", "advance", "grace", "emit", "caching", "suppress", "retention",
                    "none_on", "raise_on", "store_named"},
    "sliding": {"op", "diff", "grace", "emit", "caching", "suppress", "retention", "none_on",
                "raise_on", "store_named"},
    "stream_aggregate": {"op", "caching", "suppress", "none_on", "raise_on", "store_named"},
    "table_aggregate": {"op", "groups", "caching", "source_caching", "int_key_on",
                        "store_named", "none_on", "raise_on", "subtractor_none_on",
                        "subtractor_raise_on"},
    "punctuator": PUNCTUATOR_PARAMS,
    **JOIN_SHAPES,
    **DSL_SHAPES,
}
VALUE_OPS = {"count", "sum", "reduce_sum", "reduce_max", "concat", "reduce_concat"}
STRING_OPS = {"concat", "reduce_concat"}


class CaseError(ValueError):
    """A case kspark's side cannot build (unknown shape or parameter)."""


# -- parameters ------------------------------------------------------------------------------------
class Params:
    def __init__(self, shape: str, params: dict[str, Any] | None) -> None:
        self.shape = shape
        self.p = dict(params or {})
        unknown = set(self.p) - SHAPES[shape] - COMMON
        if unknown:
            raise CaseError(f"unknown parameter {sorted(unknown)[0]!r} for shape {shape!r}")

    def get(self, name: str, default: Any = None) -> Any:
        value = self.p.get(name)
        return default if value is None else value


def _value_serde(op: str) -> serdes.Serde:
    return serdes.String() if op in STRING_OPS else serdes.Long()


def _materialized(p: Params, windowed: bool) -> Materialized:
    """The oracle's ``Materialized.as("store")`` with its serdes (String keys, the op's values),
    so that the changelogs are byte-comparable (``test_byte_compat.py``)."""
    retention = p.get("retention") if windowed else None
    return Materialized(_store_name(p), retention=retention, caching=p.get("caching", True),
                        key_serde=serdes.String(), value_serde=_value_serde(p.get("op")))


def _store_name(p: Params) -> str | None:
    """The aggregation's store name: "store", or none (generated) with ``store_named`` false."""
    return "store" if p.get("store_named", True) else None


def aggregate_store(topology: Topology, p: Params) -> str:
    """The name of the aggregation's store in ``topology`` (:func:`_store_name`)."""
    for node in topology.nodes.values():
        if (isinstance(node, ProcessorNode)
                and re.fullmatch(r"K(STREAM|TABLE)-(AGGREGATE|REDUCE)-\d+", node.name)):
            return node.stores[0]
    raise CaseError(f"no aggregation store in {topology.describe()}")


def _suppress(p: Params, table: Any) -> Any:
    s = p.get("suppress")
    if s is None:
        return table
    if s["type"] == "window_close":
        return table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    if s["type"] == "time_limit":
        max_records = s.get("max_records")
        buffer = (BufferConfig.unbounded() if max_records is None
                  else BufferConfig.max_records(max_records))
        return table.suppress(Suppressed.until_time_limit(s["limit"], buffer))
    raise CaseError(f"unknown suppress type {s['type']!r}")


def _emit(windowed: Any, p: Params) -> Any:
    if p.get("emit", "update") == "close":
        return windowed.emit_strategy(EmitStrategy.on_window_close())
    return windowed


def _misbehaving(p: Params, prefix: str = "") -> Misbehaving:
    """The case's ``none_on`` / ``raise_on`` (or ``<prefix>none_on`` / ``<prefix>raise_on``)."""
    return Misbehaving(p.get(prefix + "none_on"), p.get(prefix + "raise_on"))


def _windowed_aggregate(windowed: Any, p: Params, m: Materialized, session: bool) -> Any:
    op = p.get("op")
    if op == "count":
        return windowed.count(m)
    if op in ("sum", "concat"):
        init = zero if op == "sum" else empty
        if session:
            merger = _misbehaving(p, "merger_")
            return windowed.aggregate(init, _misbehaving(p).session_aggregator(op, merger),
                                      merger.merger(op) if merger.active() else merge, m)
        return windowed.aggregate(init, _misbehaving(p).aggregator(op), m)
    return windowed.reduce(_misbehaving(p).reducer(op), m)


class Built:
    """A shape's topology, what its input topics and "out" hold, and its stores by kind
    (``"logged"``: changelog only, its contents not dumped)."""

    def __init__(self, topology: Any, in_value: serdes.Serde | dict[str, serdes.Serde],
                 out_key: serdes.Serde, out_value: serdes.Serde, stores: dict[str, str]) -> None:
        self.topology = topology
        #: input topic -> its value serde (keys are strings)
        self.inputs = in_value if isinstance(in_value, dict) else {"in": in_value}
        self.out_key = out_key
        self.out_value = out_value
        self.stores = stores


def _session(p: Params) -> Built:
    op = p.get("op")
    if _misbehaving(p, "merger_").active() and op not in ("sum", "concat"):
        raise CaseError(f"the session merger's parameters need op 'sum' or 'concat', not {op!r}")
    gap, grace = p.get("gap"), p.get("grace", 0)
    windows = (SessionWindows.of_inactivity_gap_with_no_grace(gap) if grace == 0
               else SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    builder = StreamsBuilder()
    vs = _value_serde(op)
    windowed = _emit(builder.stream("in", serdes.String(), vs).group_by_key().windowed_by(windows),
                     p)
    table = _windowed_aggregate(windowed, p, _materialized(p, True), True)
    key_serde = serdes.SessionWindowed(serdes.String())
    _suppress(p, table).to_stream().to("out", key_serde, _value_serde(op))
    topology = builder.build()
    return Built(topology, vs, key_serde, _value_serde(op),
                 {aggregate_store(topology, p): "session"})


def _time_window(p: Params, sliding: bool) -> Built:
    op = p.get("op")
    grace = p.get("grace", 0)
    if sliding:
        size = p.get("diff")
        windows: Any = (SlidingWindows.of_time_difference_with_no_grace(size) if grace == 0
                        else SlidingWindows.of_time_difference_and_grace(size, grace))
    else:
        size = p.get("size")
        advance = p.get("advance", size)
        windows = (TimeWindows.of_size_with_no_grace(size) if grace == 0
                   else TimeWindows.of_size_and_grace(size, grace))
        if advance != size:
            windows = windows.advance_by(advance)
    builder = StreamsBuilder()
    vs = _value_serde(op)
    windowed = _emit(builder.stream("in", serdes.String(), vs).group_by_key().windowed_by(windows),
                     p)
    table = _windowed_aggregate(windowed, p, _materialized(p, True), False)
    key_serde = serdes.TimeWindowed(serdes.String(), size)
    _suppress(p, table).to_stream().to("out", key_serde, _value_serde(op))
    topology = builder.build()
    return Built(topology, vs, key_serde, _value_serde(op),
                 {aggregate_store(topology, p): "window"})


def _stream_aggregate(p: Params) -> Built:
    op = p.get("op")
    builder = StreamsBuilder()
    vs = _value_serde(op)
    grouped = builder.stream("in", serdes.String(), vs).group_by_key()
    m = _materialized(p, False)
    if op == "count":
        table = grouped.count(m)
    elif op in ("sum", "concat"):
        table = grouped.aggregate(zero if op == "sum" else empty, _misbehaving(p).aggregator(op), m)
    else:
        table = grouped.reduce(_misbehaving(p).reducer(op), m)
    _suppress(p, table).to_stream().to("out", serdes.String(), _value_serde(op))
    topology = builder.build()
    return Built(topology, vs, serdes.String(), _value_serde(op),
                 {aggregate_store(topology, p): "kv_ts"})


def _table_aggregate(p: Params) -> Built:
    op = p.get("op")
    groups = p.get("groups", 3)
    builder = StreamsBuilder()
    source = Materialized("source", caching=p.get("source_caching", True),
                          key_serde=serdes.String(), value_serde=serdes.Long())
    int_key_on = p.get("int_key_on")  # a value grouped under itself: an int, not a str key
    grouped = builder.table("in", serdes.String(), serdes.Long(), materialized=source).group_by(
        lambda k, v: (v if v == int_key_on else group(v, groups), v), key_serde=serdes.String(),
        value_serde=serdes.Long())
    m = Materialized(_store_name(p), caching=p.get("caching", True), key_serde=serdes.String(),
                     value_serde=serdes.Long())
    subtractor = _misbehaving(p, "subtractor_")
    if op == "sum":
        table = grouped.aggregate(zero, _misbehaving(p).aggregator("sum"),  # the adder
                                  lambda k, v, agg: None if subtractor.returns_none(v) else agg - v,
                                  m)
    elif op == "count":
        table = grouped.count(m)
    elif op == "reduce_sum":
        table = grouped.reduce(_misbehaving(p).reducer("reduce_sum"),
                               lambda a, b: None if subtractor.returns_none(b) else a - b, m)
    else:
        raise CaseError(f"unknown op {op!r} for shape 'table_aggregate'")
    table.to_stream().to("out", serdes.String(), serdes.Long())
    topology = builder.build()
    return Built(topology, serdes.Long(), serdes.String(), serdes.Long(),
                 {"source": "kv_ts", aggregate_store(topology, p): "kv_ts"})


def _join(shape: str, p: Params) -> Built:
    """A join shape (``kspark_joins``): String keys and values on "left", "right" and "out"."""
    topology, inputs, stores = build_join(shape, p)
    text = serdes.String()
    return Built(topology, {topic: text for topic in inputs}, text, text, stores)


def _dsl(shape: str, p: Params) -> Built:
    """A DSL shape (``kspark_dsl``): String keys."""
    topology, inputs = build_dsl(shape, p)
    key = out_key_serde(shape, p)
    stores = dict(DSL_STORES.get(shape, {}))
    if shape == "cogroup" and p.get("named", True) and p.get("windows", "none") == "none":
        stores["store"] = "kv_ts"
    if shape == "grouping" and p.get("counts_named", True):
        stores = {"counts": "kv_ts", **stores}
    if shape == "table_ops":
        stores.update({name: "kv_ts" for name, param in (("source", "source_named"),
                                                        ("result", "op_materialized"))
                       if p.get(param, False)})
        if p.get("op_unnamed", False):
            stores.pop("result", None)
    return Built(topology, inputs, key, DSL_BUILDERS[shape][1], stores)


BUILDERS: dict[str, Callable[[Params], Built]] = {
    **{shape: partial(_dsl, shape) for shape in DSL_SHAPES},
    **{shape: partial(_join, shape) for shape in JOIN_SHAPES},
    "session": _session,
    "time_window": lambda p: _time_window(p, False),
    "sliding": lambda p: _time_window(p, True),
    "stream_aggregate": _stream_aggregate,
    "table_aggregate": _table_aggregate,
    "punctuator": lambda p: Built(*build_punctuator(p)),
}


def build(case: dict[str, Any]) -> Built:
    shape = case.get("shape")
    if shape not in SHAPES:
        raise CaseError(f"unknown shape {shape!r} (known: {list(SHAPES)})")
    p = Params(shape, case.get("params"))
    op = p.get("op")
    if "op" in SHAPES[shape] and op not in VALUE_OPS:
        raise CaseError(f"unknown op {op!r} for shape {shape!r}")
    return BUILDERS[shape](p)


# -- running ---------------------------------------------------------------------------------------
def _key_fields(key: Any) -> dict[str, Any]:
    if isinstance(key, Windowed):
        return {"key": key.key, "window": [key.window.start, key.window.end]}
    return {"key": key, "window": None}


def _store_lines(driver: TopologyTestDriver, name: str, kind: str,
                 keys: set[str]) -> list[dict[str, Any]]:
    if kind == "logged":
        return []
    store: Any = driver.get_state_store(name)
    entries = []
    if kind == "session":
        for key in sorted(keys):
            for kv in store.fetch(key):
                entries.append({**_key_fields(kv.key), "value": kv.value, "ts": None})
    elif kind == "window":
        for kv in store.fetch_all_with_timestamps(None, None):
            entries.append({**_key_fields(kv.key), "value": kv.value.value,
                            "ts": kv.value.timestamp})
    elif kind == "versioned":
        for key in sorted(keys):
            latest = store.get(key)
            if latest is not None:
                entries.append({**_key_fields(key), "value": latest.value, "ts": latest.timestamp})
    elif kind == "kv_ts":
        for kv in store.all():
            stamped = store.get_with_timestamp(kv.key)
            entries.append({**_key_fields(kv.key), "value": stamped.value,
                            "ts": stamped.timestamp})
    else:
        for kv in store.all():
            entries.append({**_key_fields(kv.key), "value": kv.value, "ts": None})
    entries.sort(key=lambda e: (e["key"], *(e["window"] or (0, 0))))
    return [{"kind": "store", "store": name, **e} for e in entries]


def _changelog_lines(driver: TopologyTestDriver, stores: dict[str, str]) -> list[dict[str, Any]]:
    """The records of each store's changelog topic, as the oracle prints them (bytes in hex)."""
    lines = []
    for store in sorted(stores):
        topic = driver.create_output_topic(driver.changelog_topic(store), serdes.Bytes(),
                                           serdes.Bytes())
        for rec in topic.read_records_to_list():
            lines.append({"kind": "changelog", "store": store, "key": rec.key.hex(),
                          "value": None if rec.value is None else rec.value.hex(),
                          "ts": rec.timestamp, "headers": [list(h) for h in rec.headers]})
    return lines


def run(case: dict[str, Any], *,
        before: Callable[[TopologyTestDriver, Built], None] | None = None,
        every_changelog: bool = False) -> list[dict[str, Any]]:
    """kspark's lines for ``case``, in the oracle's normalised form (with ``"changelogs":
    true``, the changelog records between the output records and the stores, as the oracle:
    of the stores ``Built.stores`` names, or with ``every_changelog`` of every logged store).
    ``before(driver, built)`` runs before the first input (a restart restores stores there)."""
    built = build(case)
    lines: list[dict[str, Any]] = []
    if case.get("describe"):
        lines.append({"kind": "describe", "text": str(built.topology.describe())})
    keys: set[str] = set()
    offsets: dict[str, int] = {}
    failed = False
    try:
        with TopologyTestDriver(built.topology, initial_wall_clock_ms=0,
                                config={"application.id": "kspark-oracle"}) as driver:
            failed = _drive(case, built, driver, before, lines, keys, offsets)
            if not failed and case.get("changelogs"):
                logged = ({name: "logged" for name, b in built.topology.store_builders.items()
                           if b.logging} if every_changelog else built.stores)
                lines.extend(_changelog_lines(driver, logged))
            for name, kind in () if failed else built.stores.items():
                lines.extend(_store_lines(driver, name, kind, keys))
    except StreamsError:
        if not failed:
            raise
        # closing the driver after a failed record may fail again (its caches flushed): the
        # case has already stopped at the first failure, as the oracle's
    return lines


def _drive(case: dict[str, Any], built: Built, driver: TopologyTestDriver,
           before: Callable[[TopologyTestDriver, Built], None] | None,
           lines: list[dict[str, Any]], keys: set[str], offsets: dict[str, int]) -> bool:
    """Pipe ``case``'s inputs into ``driver``, the output records into ``lines``; ``True`` if a
    record failed (its :func:`failure_line` ends ``lines``)."""
    if before is not None:
        before(driver, built)
    inputs = {topic: driver.create_input_topic(topic, serdes.String(), serde)
              for topic, serde in built.inputs.items()}
    out = driver.create_output_topic("out", built.out_key, built.out_value)

    def drain() -> None:
        for rec in out.read_records_to_list():
            lines.append({"kind": "record", **_key_fields(rec.key), "value": rec.value,
                          "ts": rec.timestamp, "tombstone": rec.value is None})
            if rec.headers:  # as the oracle: only when some
                lines[-1]["headers"] = [[n, None if v is None else v.hex()]
                                        for n, v in rec.headers]

    for index, item in enumerate(case.get("inputs") or ()):
        if "advance_wall_clock" in item:
            try:
                driver.advance_wall_clock_time(item["advance_wall_clock"])
            except StreamsError as exc:  # a wall-clock punctuator failed
                line = failure_line(exc, item, index, -1)
                if line is None:
                    raise
                drain()
                lines.append(line)
                return True
        else:
            if item.get("key") is not None:
                keys.add(item["key"])
            topic = item.get("topic", "in")
            if topic not in inputs:
                raise CaseError(f"shape {case['shape']!r} reads no topic {topic!r} "
                                f"(its topics: {sorted(inputs)})")
            offset = offsets[topic] = offsets.get(topic, -1) + 1
            try:
                inputs[topic].pipe_input(item.get("key"), item.get("value"), item["ts"],
                                         headers=[(n, None if v is None else bytes.fromhex(v))
                                                  for n, v in item.get("headers", ())])
            except StreamsError as exc:
                line = failure_line(exc, item, index, offset)
                if line is None:
                    raise
                drain()
                lines.append(line)
                return True
        drain()
    drain()
    return False
