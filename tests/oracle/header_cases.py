"""Random cases of the ``headers`` shape (``kspark_headers.py``, ``oracle/.../HeaderShape.java``):
records with random headers through a random pipeline, to compare the headers of every result
(``oracle_cases.STRATEGIES["headers"]``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from kspark_headers import OPS, VALUE_OPS

#: few names, so that a record's names repeat; values: null, empty and some bytes (hex)
HEADER_NAMES = ("h", "d", "e")
HEADER_VALUES = (None, "", "01", "ff00")
#: the topic of a tail's other side
OTHER_TOPIC = {"stream_table_join": "t", "stream_join": "s"}


@st.composite
def with_headers(draw: st.DrawFn, record: dict) -> dict:
    """``record`` with 0 to 3 headers, or (one in four) without a ``headers`` field."""
    if draw(st.integers(0, 3)) == 0:
        return record
    n = draw(st.integers(0, 3))
    return {**record, "headers": [[draw(st.sampled_from(HEADER_NAMES)),
                                   draw(st.sampled_from(HEADER_VALUES))] for _ in range(n)]}


@st.composite
def _tail(draw: st.DrawFn, tail: str) -> dict[str, Any]:
    """The parameters of ``tail``."""
    p: dict[str, Any] = {}
    if tail in ("aggregate", "table_aggregate", "windowed"):
        p["agg"] = draw(st.sampled_from(["count", "sum", "reduce_sum"]))
        p["caching"] = draw(st.booleans())
    if tail in ("aggregate", "table_aggregate") and draw(st.integers(0, 2)) == 0:
        p["suppress"] = {"type": "time_limit", "limit": draw(st.integers(0, 40)),
                         "max_records": draw(st.one_of(st.none(), st.integers(1, 3)))}
    if tail in ("table_aggregate", "stream_table_join"):
        p["table_caching"] = draw(st.booleans())
    if tail == "windowed":
        p["windows"] = draw(st.sampled_from(["time", "sliding", "session"]))
        p["size"] = draw(st.integers(1, 40))
        p["grace"] = draw(st.integers(0, 30))
        if p["windows"] == "time" and draw(st.booleans()):
            p["advance"] = draw(st.integers(1, p["size"]))
        p["emit"] = draw(st.sampled_from(["update", "close"]))
        suppress = draw(st.sampled_from([None, None, "window_close", "time_limit"]))
        if suppress == "window_close":
            p["suppress"] = {"type": "window_close"}
        elif suppress == "time_limit":
            p["suppress"] = {"type": "time_limit", "limit": draw(st.integers(0, 40)),
                             "max_records": draw(st.one_of(st.none(), st.integers(1, 3)))}
    if tail == "stream_table_join":
        p["kind"] = draw(st.sampled_from(["inner", "left"]))
        if draw(st.integers(0, 2)):  # a versioned table, read as of each record's time
            p["versioned"] = draw(st.integers(0, 60))
            if draw(st.integers(0, 2)):  # a grace buffer, which keeps the records' headers
                p["grace"] = draw(st.integers(0, p["versioned"]))
    if tail == "stream_join":
        p["kind"] = draw(st.sampled_from(["inner", "left", "outer"]))
        p["size"] = draw(st.integers(0, 30))
        p["grace"] = draw(st.integers(0, 30))
    return p


@st.composite
def headers_case(draw: st.DrawFn, records: Callable[..., st.SearchStrategy[list[dict]]],
                 store_type: st.SearchStrategy[str]) -> dict:
    """A stream or a table's stream, 0 to 3 stateless operators (re-keying ones among them,
    header operators that read, set, add and remove), one tail (none, a stream or table
    aggregation, cached or not and now and then suppressed, a time, sliding or session window
    emitting on update or on close, a stream-table join (its table versioned or not, with a
    grace buffer or not) or a stream-stream join) and 0 to 2 value-only
    operators; input records (``records``: ``oracle_cases.join_records``) carrying random
    headers, on "in" and the tail's other topic."""
    tail = draw(st.sampled_from(["none", "aggregate", "table_aggregate", "windowed", "windowed",
                                 "stream_table_join", "stream_join"]))
    p: dict[str, Any] = {"source": draw(st.sampled_from(["stream", "stream", "table"])),
                         "tail": tail}
    if p["source"] == "table":
        p["source_caching"] = draw(st.booleans())
    pre = draw(st.lists(st.sampled_from(OPS), max_size=3))
    if pre:
        p["pre"] = pre
    p.update(draw(_tail(tail)))
    post = draw(st.lists(st.sampled_from(VALUE_OPS), max_size=2))
    if post:
        p["post"] = post
    # a stream-stream join's and on_window_close's stores follow RocksDB's (oracle_cases'
    # stream_join_case and windowed_case say why)
    p["store_type"] = ("rocksdb" if tail == "stream_join" or p.get("emit") == "close"
                       else draw(store_type))
    topics = ("in", OTHER_TOPIC[tail]) if tail in OTHER_TOPIC else ("in",)
    value = st.one_of(st.integers(-5, 20), st.none())
    # Kafka Streams 4.3.1 fails on a null key in a left join's grace buffer (oracle_cases'
    # stream_table_join_case says where)
    null_keys = not (p.get("kind") == "left" and tail == "stream_table_join" and "grace" in p)
    inputs = [draw(with_headers(record))
              for record in draw(records(topics, value=value, null_keys=null_keys))]
    return {"shape": "headers", "params": p, "inputs": inputs}
