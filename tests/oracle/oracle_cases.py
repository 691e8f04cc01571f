"""Random cases per shape (hypothesis strategies). How a case maps onto the oracle and how the
two sides' lines are compared, with every normalisation and its reason: ``comparison.py``.

Shared by ``test_differential.py`` (CI, a few hundred cases per shape), the byte-compatibility
tests and ``benchmarks/differential_fuzz.py`` (many more).
"""

from __future__ import annotations

from typing import Any

from case_parts import (
    KEYS,
    LONG_OPS,
    STRING_OPS,
    grace,
    join_records,
    joiner_misbehaving,
    kspark_minimum,
    misbehaving,
    or_an_input_value,
    records,
    selecting_value,
    store_named,
    store_type,
    suppress,
)
from comparison import LONG_RETENTION
from header_cases import headers_case
from hypothesis import strategies as st
from kspark_named import NODES as NAMED_NODES
from kspark_named import STORES as NAMED_STORES

__all__ = ["KEYS", "STATELESS_SHAPES", "STRATEGIES"]


@st.composite
def windowed_case(draw: st.DrawFn, shape: str, with_suppress: bool | None = None) -> dict:
    """A random windowed case. ``with_suppress``: always / never / sometimes (``None``)."""
    op = draw(st.sampled_from(LONG_OPS + STRING_OPS))
    p: dict[str, Any] = {"op": op, "grace": draw(grace())}
    if shape == "session":  # now and then a gap of 0: sessions of records at equal times
        p["gap"] = 0 if draw(st.integers(0, 7)) == 0 else draw(st.integers(1, 40))
    # with a misbehaving merger (below) or a gap of 0, more records of one key merge sessions
    merging = shape == "session" and op in ("sum", "concat") and draw(st.booleans())
    dense = merging or p.get("gap") == 0
    # a null value reaches the aggregator of a session or time window
    # (KStreamSessionWindowAggregate / KStreamWindowAggregate#process skip null keys only);
    # sliding windows drop it (KStreamSlidingWindowAggregate#process)
    inputs = draw(records(op, True, dense=dense))
    if shape == "time_window":
        p["size"] = draw(st.integers(1, 60))
        if draw(st.booleans()):
            p["advance"] = draw(st.integers(1, p["size"]))
    elif shape == "sliding":
        p["diff"] = draw(st.integers(1, 40))
    p["emit"] = draw(st.sampled_from(["update", "close"]))
    p["caching"] = draw(st.booleans())
    # Kafka Streams builds session and sliding stores emitting on window close without a cache
    cached = p["caching"] and not (p["emit"] == "close" and shape != "time_window")
    if cached and p["emit"] == "update" and shape != "time_window":
        p["retention"] = LONG_RETENTION  # comparison.py: Kafka's cache ignores retention
    elif p["emit"] == "close" and shape != "session" and not cached:
        p["retention"] = LONG_RETENTION  # comparison.py: Kafka loses expired final results
    else:  # the default (the minimum), a little more, or much more
        extra = draw(st.one_of(st.none(), st.integers(0, 50), st.integers(200, 5_000)))
        if extra is not None:
            p["retention"] = kspark_minimum(shape, p) + extra
    if p["op"] != "count":
        p.update(draw(misbehaving(op)))
    if merging:  # the merger, judged by its aggregates (the initializer's among them)
        pool = st.sampled_from([0 if op == "sum" else "",
                                *sorted({i["value"] for i in inputs if i["value"] is not None},
                                        key=str)])
        for kind in draw(st.sampled_from([("none_on",), ("raise_on",),
                                          ("none_on", "raise_on")])):
            p["merger_" + kind] = draw(pool)
    p.update(draw(store_named()))
    if with_suppress or (with_suppress is None and draw(st.booleans())):
        p["suppress"] = draw(suppress(True))
    # Kafka Streams' in-memory stores lose on_window_close results: the closing record's put
    # expires what the final-result query then looks for (InMemorySessionStore drops sessions
    # with end <= observed - retention before findSessions(earliestEnd, latestEnd)); its default
    # RocksDB stores keep them. The referee for on_window_close is therefore RocksDB
    # (test_differential.py::test_kafka_in_memory_store_loses_final_session_results)
    p["store_type"] = "rocksdb" if p["emit"] == "close" else draw(store_type())
    return {"shape": shape, "params": p, "inputs": inputs}


@st.composite
def stream_aggregate_case(draw: st.DrawFn) -> dict:
    op = draw(st.sampled_from(LONG_OPS + STRING_OPS))
    p: dict[str, Any] = {"op": op, "caching": draw(st.booleans()),
                         "store_type": draw(store_type())}
    if draw(st.booleans()):
        p["suppress"] = draw(suppress(False))
    if op != "count":
        p.update(draw(misbehaving(op)))
    p.update(draw(store_named()))
    return {"shape": "stream_aggregate", "params": p, "inputs": draw(records(op, True))}


@st.composite
def table_aggregate_case(draw: st.DrawFn) -> dict:
    p = {"op": draw(st.sampled_from(["sum", "count", "reduce_sum"])),
         "groups": draw(st.integers(1, 3)),
         "caching": draw(st.booleans()), "source_caching": draw(st.booleans()),
         "store_type": draw(store_type())}
    if draw(st.integers(0, 4)) == 0:  # a value grouped under itself: a key of the wrong type
        p["int_key_on"] = draw(st.integers(-5, 20))
    p.update(draw(store_named()))
    inputs = draw(records("sum", True))
    if p["op"] != "count":  # the adder and the subtractor
        p.update(draw(misbehaving("sum")))
        p.update(draw(misbehaving("sum", "subtractor_", inputs, often=True)))
    return {"shape": "table_aggregate", "params": p, "inputs": inputs}


@st.composite
def punctuator_case(draw: st.DrawFn) -> dict:
    optional = st.one_of(st.none(), st.integers(1, 3))
    p = {"stream_interval": draw(st.one_of(st.integers(1, 30), st.none())),
         "wall_interval": draw(st.one_of(st.integers(1, 30), st.none())),
         "stream_cancel_after": draw(optional), "wall_cancel_after": draw(optional),
         "caching": draw(st.booleans()), "store_type": draw(store_type())}
    for name in ("stream_raise_at", "wall_raise_at"):  # a punctuator failing at its n-th fire
        if draw(st.integers(0, 4)) == 0:
            p[name] = draw(st.integers(1, 4))
    inputs: list[dict] = []
    for rec in draw(records("sum", True)):
        if draw(st.integers(0, 3)) == 0:
            inputs.append({"advance_wall_clock": draw(st.integers(0, 45))})
        inputs.append(rec)
    return {"shape": "punctuator", "params": p, "inputs": inputs}


#: the strategy of each tested shape (the keys name the tests and the fuzz script's rows)
STRATEGIES: dict[str, st.SearchStrategy[dict]] = {
    "session": windowed_case("session", with_suppress=False),
    "session_suppressed": windowed_case("session", with_suppress=True),
    "time_window": windowed_case("time_window", with_suppress=False),
    "time_window_suppressed": windowed_case("time_window", with_suppress=True),
    "sliding": windowed_case("sliding"),
    "stream_aggregate": stream_aggregate_case(),
    "table_aggregate": table_aggregate_case(),
    "punctuator": punctuator_case(),
}


# -- join shapes ------------------------------------------------------------------------------
@st.composite
def stream_join_case(draw: st.DrawFn) -> dict:
    p: dict[str, Any] = {"kind": draw(st.sampled_from(["inner", "left", "outer"])),
                         "diff": draw(st.integers(0, 30))}
    if draw(st.booleans()):
        p["grace"] = draw(st.integers(0, 30))
    if draw(st.integers(0, 2)) == 0:
        before = draw(st.integers(-10, 30))
        p["before"] = before
        p["after"] = draw(st.integers(max(-10, -before), 30))
    elif draw(st.integers(0, 3)) == 0:
        p["after"] = draw(st.integers(-p["diff"], 30))
    if draw(st.booleans()):
        p["store_name"] = draw(st.sampled_from(["joined", "j"]))
    if draw(st.integers(0, 4)) == 0:
        p["logging"] = False
    mode = draw(st.integers(0, 7))
    if mode == 0:
        p["self"] = True
    elif mode == 1:
        p["rekey_left"] = True
    # Kafka Streams' in-memory window store expires record by record and moves its stream time
    # on a put of a null value; its default RocksDB store, which kspark's stores follow, does
    # neither (test_differential.py::test_join_stores_follow_kafka_streams_rocksdb_stores)
    p["store_type"] = "rocksdb"
    p.update(draw(joiner_misbehaving("xyz")))
    topics = ("left",) if p.get("self") else ("left", "right")
    return {"shape": "stream_join", "params": p, "inputs": draw(join_records(topics)),
            "changelogs": draw(st.booleans())}


STRATEGIES["stream_join"] = stream_join_case()


@st.composite
def stream_table_join_case(draw: st.DrawFn) -> dict:
    p: dict[str, Any] = {"kind": draw(st.sampled_from(["inner", "left"])),
                         "table_caching": draw(st.booleans()),
                         "store_type": draw(store_type())}
    if draw(st.integers(0, 4)) == 0:
        p["rekey_left"] = True
    if draw(st.booleans()):  # a versioned table, read as of each record's time
        p["versioned"] = draw(st.integers(0, 60))
        if draw(st.booleans()):
            p["grace"] = draw(st.integers(0, p["versioned"]))
    # Kafka Streams 4.3.1 fails on a null key in a left join's grace buffer
    # (test_differential.py::test_kafka_streams_fails_on_a_null_key_in_a_grace_buffer)
    null_keys = not (p.get("grace") is not None and p["kind"] == "left")
    p.update(draw(joiner_misbehaving("xyz")))
    return {"shape": "stream_table_join", "params": p,
            "inputs": draw(join_records(("left", "right"), null_keys=null_keys)),
            "changelogs": draw(st.booleans())}


@st.composite
def global_join_case(draw: st.DrawFn) -> dict:
    p = {"kind": draw(st.sampled_from(["inner", "left"])), "store_type": draw(store_type()),
         "global_caching": draw(st.booleans()), **draw(joiner_misbehaving("abcn"))}
    return {"shape": "global_join", "params": p,
            "inputs": draw(join_records(("left", "right"), value=selecting_value()))}


@st.composite
def table_join_case(draw: st.DrawFn, foreign_key: bool) -> dict:
    kinds = ["inner", "left"] if foreign_key else ["inner", "left", "outer"]
    p: dict[str, Any] = {"kind": draw(st.sampled_from(kinds)),
                         "left_caching": draw(st.booleans()),
                         "right_caching": draw(st.booleans()),
                         "store_type": draw(store_type())}
    if draw(st.booleans()):
        p["materialized"] = True
        p["result_caching"] = draw(st.booleans())
    for side in ("left_versioned", "right_versioned"):
        if draw(st.integers(0, 3)) == 0:
            p[side] = draw(st.integers(0, 60))
    value = selecting_value() if foreign_key else None
    p.update(draw(joiner_misbehaving("abcn" if foreign_key else "xyz")))
    return {"shape": "fk_join" if foreign_key else "table_join", "params": p,
            "inputs": draw(join_records(("left", "right"), value=value)),
            "changelogs": draw(st.booleans())}


STRATEGIES["stream_table_join"] = stream_table_join_case()
STRATEGIES["global_join"] = global_join_case()
STRATEGIES["table_join"] = table_join_case(False)
STRATEGIES["fk_join"] = table_join_case(True)


# -- DSL shapes without stores (not in the byte-compatibility tests) ----------------------------
@st.composite
def _branch_spec(draw: st.DrawFn, names: list[str]) -> dict:
    """A branch's name (none, or one not used yet) and chain."""
    spec: dict[str, Any] = {"chain": draw(st.sampled_from(["none", "none", "map", "consume",
                                                            "drop"]))}
    if draw(st.booleans()):
        free = [n for n in ("x", "y", "z", "1-a", "w") if n not in names]
        name = draw(st.sampled_from(free))
        names.append(name)
        spec["name"] = name
    return spec


@st.composite
def branch_case(draw: st.DrawFn) -> dict:
    """``split`` with 0 to 4 branches (predicates that overlap, on values mod m, null values or
    the key, now and then failing on a value), named or by position, a default branch or none,
    each with or without a chain."""
    names: list[str] = []
    branches = []
    inputs = draw(records("sum", True))
    for _ in range(draw(st.integers(0, 4))):
        pred = draw(st.one_of(
            st.builds(lambda m, r: {"mod": m, "rem": r % m}, st.integers(1, 4), st.integers(0, 3)),
            st.just({"null": True}),
            st.builds(lambda k: {"key": k}, st.sampled_from(KEYS))))
        if draw(st.integers(0, 5)) == 0:  # failing on a value before it tests
            pred = {**pred, "raise_on": draw(or_an_input_value(st.integers(-5, 20), inputs))}
        branches.append({"pred": pred, **draw(_branch_spec(names))})
    p: dict[str, Any] = {"branches": branches}
    if draw(st.booleans()):
        p["prefix"] = draw(st.sampled_from(["split-", "b"]))
    if draw(st.integers(0, 2)):
        p["default"] = draw(_branch_spec(names))
    return {"shape": "branch", "params": p, "inputs": inputs}


@st.composite
def repartition_case(draw: st.DrawFn) -> dict:
    """``repartition`` named or not, with a partition count or not, after a key change or
    not (null keys reach the repartition topic and are dropped by the count; the key selector
    now and then returns null, a key of the wrong type or fails)."""
    p: dict[str, Any] = {"rekey": draw(st.booleans()), "caching": draw(st.booleans()),
                         "store_type": draw(store_type())}
    inputs = draw(records("sum", True))
    if p["rekey"]:
        p.update(draw(misbehaving("sum", "", inputs, often=True)))
        if draw(st.integers(0, 4)) == 0:  # a key of the wrong type (see table_aggregate_case)
            p["int_key_on"] = draw(or_an_input_value(st.integers(-5, 20), inputs))
    if draw(st.booleans()):
        p["name"] = draw(st.sampled_from(["by-user", "KSTREAM-X-0000000007"]))
    if draw(st.booleans()):
        p["partitions"] = draw(st.integers(1, 6))
    return {"shape": "repartition", "params": p, "inputs": inputs}


@st.composite
def process_values_case(draw: st.DrawFn) -> dict:
    p: dict[str, Any] = {"rekey": draw(st.booleans()), "caching": draw(st.booleans()),
                         "store_type": draw(store_type())}
    inputs = draw(records("sum", True))
    if draw(st.integers(0, 4)) == 0:  # the processor fails on a value after its first forward
        p["raise_on"] = draw(or_an_input_value(st.integers(-5, 20), inputs))
    return {"shape": "process_values", "params": p, "inputs": inputs}


@st.composite
def timestamp_extractor_case(draw: st.DrawFn) -> dict:
    """Values as the records' event times (negative ones dropped, null ones at the partition
    time), out of order."""
    p = {"grace": draw(st.one_of(st.just(0), st.integers(1, 15)))}
    return {"shape": "timestamp_extractor", "params": p, "inputs": draw(records("sum", True))}


@st.composite
def cogroup_case(draw: st.DrawFn) -> dict:
    p = {"rekey_b": draw(st.booleans()), "named": draw(st.booleans()),
         "caching": draw(st.booleans()), "store_type": draw(store_type()),
         "windows": draw(st.sampled_from(["none", "time", "sliding", "session"]))}
    if p["windows"] != "none":
        p["grace"] = draw(grace())
        # a retention above the minimum (sessions and sliding windows: 1 ms more at least,
        # README deviation 2), or the default long one; with caching on, every kind keeps the
        # long one: Kafka's cache serves entries its store has expired (README, "Expired data
        # stays expired"), and a cogroup's one store expires windows by the stream time of all
        # its inputs while each input's processor closes them by its own
        # (test_differential.py::test_deviation_kafka_cache_serves_expired_cogroup_windows)
        if not p["caching"]:
            minimum = {"time": 10, "session": 10, "sliding": 20}[p["windows"]] + p["grace"]
            extra = draw(st.one_of(st.none(), st.integers(1, 50), st.integers(200, 5_000)))
            if extra is not None:
                p["retention"] = minimum + extra
    p.update(draw(misbehaving("sum")))  # stream a's aggregator
    value = st.one_of(st.integers(-5, 20), st.none())
    return {"shape": "cogroup", "params": p,
            "inputs": draw(join_records(("a", "b"), value=value))}


@st.composite
def table_ops_case(draw: st.DrawFn) -> dict:
    """A table read from its topic or from a stream (``to_table``), named or not, filtered,
    mapped or transformed (``transform_values``), the result materialized or not: what each
    forwards, tombstones included."""
    p = {"source": draw(st.sampled_from(["table", "to_table"])),
         "source_named": draw(st.booleans()), "caching": draw(st.booleans()),
         "operation": draw(st.sampled_from(["filter", "filter_not", "map_values",
                                            "transform_values"])),
         "op_materialized": draw(st.booleans()), "op_caching": draw(st.booleans()),
         "op_unnamed": draw(st.booleans()), "op_named": draw(st.booleans()),
         "store_type": draw(store_type())}
    if p["operation"] == "map_values":
        p.update(draw(misbehaving("sum")))
    return {"shape": "table_ops", "params": p, "inputs": draw(records("sum", True))}


#: parts of the ``named`` shape that write to internal topics (several in one case: both
#: drivers process the records of several internal topics in the order of Kafka Streams' driver,
#: kspark.testing.internals.partition_group)
NAMED_REPARTITIONING = ("stream_join", "stream_table_join", "to_table", "table_group", "fk_join")
NAMED_OTHER_PARTS = ("global_join", "table_join", "windowed", "cogroup", "process")


@st.composite
def named_case(draw: st.DrawFn) -> dict:
    """Stateless operators and their source and sink, then some of the shape's other parts
    (joins, windowed and cogrouped aggregations, a suppression, a re-grouped table,
    ``to_table``), every node (``Named``, ``Consumed`` / ``Produced.withName``,
    ``StreamJoined`` / ``Joined.withName``, ``TableJoined.as``, ``Grouped.as``,
    ``Suppressed.withName``) and store named or not."""
    parts = [part for part in (*NAMED_OTHER_PARTS, *NAMED_REPARTITIONING)
             if draw(st.integers(0, 2)) == 0]
    p: dict[str, Any] = {"names": [n for n in NAMED_NODES if draw(st.booleans())],
                         "parts": parts,
                         "store_names": [s for s in NAMED_STORES if draw(st.booleans())],
                         "kinds": {"stream_join": draw(st.sampled_from(["inner", "left",
                                                                         "outer"])),
                                   "table_join": draw(st.sampled_from(["inner", "left",
                                                                        "outer"])),
                                   **{part: draw(st.sampled_from(["inner", "left"]))
                                      for part in ("stream_table_join", "global_join",
                                                   "fk_join")}},
                         "rekey_right": draw(st.booleans()),
                         # a stream-stream join's stores follow RocksDB's (see stream_join_case)
                         "store_type": "rocksdb" if "stream_join" in parts else "in_memory"}
    topics = ["in"]
    if set(parts) & {"stream_table_join", "table_join", "fk_join", "table_group"}:
        topics.append("t")
    if set(parts) & {"table_join", "fk_join"}:
        topics.append("u")
    if "global_join" in parts:
        topics.append("g")
    value = st.one_of(st.integers(-5, 20), st.none())
    return {"shape": "named", "params": p,
            "inputs": draw(join_records(tuple(topics), value=value))}


@st.composite
def grouping_case(draw: st.DrawFn) -> dict:
    """Two aggregations of one re-keyed grouping, its repartition topic named or not."""
    p: dict[str, Any] = {"by": draw(st.sampled_from(["group_by", "group_by_key"])),
                         "caching": draw(st.booleans()), "store_type": draw(store_type()),
                         "counts_named": draw(st.booleans()), "agg_names": draw(st.booleans())}
    if draw(st.booleans()):
        p["grouped_name"] = draw(st.sampled_from(["by-parity", "KSTREAM-G-0000000042"]))
    if draw(st.integers(0, 4)) == 0:  # a key of the wrong type (see table_aggregate_case)
        p["int_key_on"] = draw(st.integers(-5, 20))
    return {"shape": "grouping", "params": p, "inputs": draw(records("sum", True))}


STRATEGIES["branch"] = branch_case()
STRATEGIES["grouping"] = grouping_case()
STRATEGIES["named"] = named_case()
STRATEGIES["table_ops"] = table_ops_case()
STRATEGIES["cogroup"] = cogroup_case()
STRATEGIES["timestamp_extractor"] = timestamp_extractor_case()
STRATEGIES["process_values"] = process_values_case()
STRATEGIES["repartition"] = repartition_case()
STRATEGIES["headers"] = headers_case(join_records, store_type())
#: shapes without stores (``named``, ``headers``: none dumped): no changelogs to compare
STATELESS_SHAPES = ("branch", "named", "headers")
