"""The oracle's join shapes built with kspark's DSL (``oracle/.../Joins.java`` mirrored;
``tests/oracle/README.md`` documents them). Keys and values are strings; the joiner of every
shape is ``joiner(left, right) = f"{left}+{right}"`` with ``None`` printed as Java prints null.
"""

from __future__ import annotations

from typing import Any

from user_functions import Misbehaving

from kspark import Materialized, StreamsBuilder, Topology, serdes
from kspark.dsl.joined import Joined, StreamJoined
from kspark.windows import JoinWindows

#: shape -> its parameters (besides the common ones)
JOIN_SHAPES: dict[str, set[str]] = {
    "stream_join": {"kind", "diff", "grace", "before", "after", "store_name", "logging", "self",
                    "rekey_left"},
    "stream_table_join": {"kind", "table_caching", "rekey_left", "versioned", "grace"},
    "global_join": {"kind"},
    "table_join": {"kind", "left_caching", "right_caching", "materialized", "result_caching",
                   "left_versioned", "right_versioned"},
    "fk_join": {"kind", "left_caching", "right_caching", "materialized", "result_caching",
                "left_versioned", "right_versioned"},
}
for _params in JOIN_SHAPES.values():  # the joiner returns None on "none_on", fails on "raise_on"
    _params.update({"none_on", "raise_on"})
JOIN_SHAPES["global_join"].add("global_caching")
KINDS = {"inner": "join", "left": "left_join", "outer": "outer_join"}


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def joiner(left: Any, right: Any) -> str:
    """The joiner of every join shape: ``left + "+" + right`` as Java concatenates them."""
    return f"{_text(left)}+{_text(right)}"


def _joiner(p: Any) -> Any:
    """:func:`joiner` returning ``None`` on the case's ``none_on`` left value, failing on
    ``raise_on`` (``user_functions.Misbehaving``)."""
    return Misbehaving(p.get("none_on"), p.get("raise_on")).joiner(joiner)


def _kind(p: Any, allowed: tuple[str, ...]) -> str:
    kind = p.get("kind")
    if kind not in allowed:
        raise ValueError(f"unknown kind {kind!r} (known: {sorted(allowed)})")
    return str(kind)


def _logged_stores(topology: Topology) -> dict[str, str]:
    """Every logged store of ``topology``, its changelog printed but not its contents."""
    return {name: "logged" for name, b in sorted(topology.store_builders.items()) if b.logging}


def _stream_join(p: Any) -> tuple[Topology, list[str], dict[str, str]]:
    joiner = _joiner(p)  # the case's
    kind = _kind(p, ("inner", "left", "outer"))
    text = serdes.String()
    windows = (JoinWindows.of_time_difference_with_no_grace(p.get("diff"))
               if p.get("grace") is None
               else JoinWindows.of_time_difference_and_grace(p.get("diff"), p.get("grace")))
    before, after = p.get("before"), p.get("after")
    # each step is checked (before + after >= 0), as in Kafka Streams: a negative "before"
    # comes after "after" when it must (the oracle does the same)
    after_first = before is not None and after is not None and before + p.get("diff") < 0
    if after_first:
        windows = windows.after(after)
    if before is not None:
        windows = windows.before(before)
    if after is not None and not after_first:
        windows = windows.after(after)
    sj = StreamJoined.with_(text, text, text)
    if p.get("store_name") is not None:
        sj = sj.with_store_name(p.get("store_name"))
    if not p.get("logging", True):
        sj = sj.with_logging_disabled()
    builder = StreamsBuilder()
    left = builder.stream("left", text, text)
    if p.get("rekey_left", False):
        left = left.select_key(lambda k, v: k)
    right = left if p.get("self", False) else builder.stream("right", text, text)
    getattr(left, KINDS[kind])(right, joiner, windows, sj).to("out", text, text)
    topology = builder.build()
    inputs = ["left"] if p.get("self", False) else ["left", "right"]
    return topology, inputs, _logged_stores(topology)


def _first(value: Any) -> Any:
    """The global join's key selector and the foreign-key extractor: the value's first
    character names the other table's key; a value starting with "n" names none."""
    return None if value is None or value.startswith("n") else value[:1]


def _stream_table_join(p: Any) -> tuple[Topology, list[str], dict[str, str]]:
    joiner = _joiner(p)  # the case's
    kind = _kind(p, ("inner", "left"))
    text = serdes.String()
    builder = StreamsBuilder()
    stream = builder.stream("left", text, text)
    if p.get("rekey_left", False):
        stream = stream.select_key(lambda k, v: k)
    history = p.get("versioned")
    table = builder.table("right", text, text, materialized=Materialized(
        "table", caching=p.get("table_caching", True), key_serde=text, value_serde=text,
        versioned_history=history))
    joined = Joined.with_(text, text, text)
    if p.get("grace") is not None:
        joined = joined.with_grace_period(p.get("grace"))
    getattr(stream, KINDS[kind])(table, joiner, joined).to("out", text, text)
    topology = builder.build()
    return topology, ["left", "right"], {**_logged_stores(topology),
                                         "table": "kv_ts" if history is None else "versioned"}


def _global_join(p: Any) -> tuple[Topology, list[str], dict[str, str]]:
    joiner = _joiner(p)  # the case's
    kind = _kind(p, ("inner", "left"))
    text = serdes.String()
    builder = StreamsBuilder()
    stream = builder.stream("left", text, text)
    table = builder.global_table("right", text, text, materialized=Materialized(
        "global", key_serde=text, value_serde=text, caching=p.get("global_caching", True)))
    getattr(stream, KINDS[kind])(table, lambda k, v: _first(v), joiner).to("out", text, text)
    return builder.build(), ["left", "right"], {"global": "kv_ts"}


def _tables(p: Any) -> tuple[StreamsBuilder, Any, Any]:
    text = serdes.String()
    builder = StreamsBuilder()
    left = builder.table("left", text, text, materialized=Materialized(
        "left-store", caching=p.get("left_caching", True), key_serde=text, value_serde=text,
        versioned_history=p.get("left_versioned")))
    right = builder.table("right", text, text, materialized=Materialized(
        "right-store", caching=p.get("right_caching", True), key_serde=text, value_serde=text,
        versioned_history=p.get("right_versioned")))
    return builder, left, right


def _result(p: Any) -> Materialized | None:
    if not p.get("materialized", False):
        return None
    text = serdes.String()
    return Materialized("result", caching=p.get("result_caching", True), key_serde=text,
                        value_serde=text)


def _table_join(p: Any, foreign_key: bool) -> tuple[Topology, list[str], dict[str, str]]:
    joiner = _joiner(p)  # the case's
    kind = _kind(p, ("inner", "left") if foreign_key else ("inner", "left", "outer"))
    builder, left, right = _tables(p)
    m = _result(p)
    fk = {"foreign_key_extractor": _first} if foreign_key else {}
    getattr(left, KINDS[kind])(right, joiner, m, **fk).to_stream().to(
        "out", serdes.String(), serdes.String())
    topology = builder.build()
    stores = {"left-store": "versioned" if p.get("left_versioned") is not None else "kv_ts",
              "right-store": "versioned" if p.get("right_versioned") is not None else "kv_ts"}
    if m is not None:
        stores["result"] = "kv_ts"
    logged = {name: "logged" for name in _logged_stores(topology) if name not in stores}
    return topology, ["left", "right"], {**stores, **logged}


_BUILDERS = {
    "stream_join": _stream_join,
    "stream_table_join": _stream_table_join,
    "global_join": _global_join,
    "table_join": lambda p: _table_join(p, False),
    "fk_join": lambda p: _table_join(p, True),
}


def build_join(shape: str, p: Any) -> tuple[Topology, list[str], dict[str, str]]:
    """The topology of join ``shape``, its input topics and its stores by kind."""
    return _BUILDERS[shape](p)
