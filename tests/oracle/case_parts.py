"""The parts the random cases of ``oracle_cases.py`` are drawn from: keys, timestamps, values,
records of one topic or several, the values on which a case's user functions misbehave."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = ("a", "b", "c")
LONG_OPS = ("count", "sum", "reduce_sum", "reduce_max")
STRING_OPS = ("concat", "reduce_concat")


@st.composite
def timestamps(draw: st.DrawFn, n: int, jumps: bool = True) -> list[int]:
    """``n`` timestamps >= 0: small steps back and forth (out of order, late), repeats (equal
    timestamps) and now and then a large jump (without ``jumps``: a step of a few ms)."""
    ts = draw(st.integers(0, 40))
    out = []
    steps = [st.integers(-30, 30), st.just(0)] + ([st.integers(200, 5_000)] if jumps
                                                  else [st.integers(-3, 3)])
    for _ in range(n):
        step = draw(st.one_of(*steps))
        ts = max(0, ts + step)
        out.append(ts)
    return out


def record_value(op: str, nulls: bool) -> st.SearchStrategy[Any]:
    base = (st.text(alphabet="xyz", min_size=1, max_size=2) if op in STRING_OPS
            else st.integers(-5, 20))
    return st.one_of(base, st.none()) if nulls else base


@st.composite
def records(draw: st.DrawFn, op: str, null_values: bool, max_size: int = 20,
            dense: bool = False) -> list[dict]:
    """Records of keys ``a``, ``b``, ``c`` or null (``dense``: of ``a`` only, without large
    jumps in time, so that they meet in windows and sessions)."""
    n = draw(st.integers(0, max_size))
    stamps = draw(timestamps(n, jumps=not dense))
    # shrinks towards non-null keys
    key = st.just("a") if dense else st.one_of(st.sampled_from(KEYS), st.none())
    return [{"key": draw(key), "value": draw(record_value(op, null_values)), "ts": ts}
            for ts in stamps]


def grace() -> st.SearchStrategy[int]:
    return st.one_of(st.just(0), st.integers(1, 40))


def store_type() -> st.SearchStrategy[str]:
    # in-memory stores run ~5x faster in the oracle; RocksDB (Kafka Streams' default) is drawn
    # for about one case in four
    return st.sampled_from(["in_memory", "in_memory", "in_memory", "rocksdb"])


@st.composite
def suppress(draw: st.DrawFn, windowed: bool) -> dict | None:
    choices = ["time_limit", "window_close"] if windowed else ["time_limit"]
    kind = draw(st.sampled_from(choices))
    if kind == "window_close":
        return {"type": "window_close"}
    return {"type": "time_limit", "limit": draw(st.integers(0, 60)),
            "max_records": draw(st.one_of(st.none(), st.integers(1, 3)))}


@st.composite
def misbehaving(draw: st.DrawFn, op: str, prefix: str = "",
                inputs: list[dict] | None = None, often: bool = False) -> dict[str, Any]:
    """Now and then a value on which the op's aggregator or reducer returns null
    (``none_on``: the aggregate is deleted) and one on which it fails (``raise_on``: both
    sides stop at that record, see ``user_functions.py``); with ``prefix``, those of another
    user function (``merger_``, ``subtractor_``). With ``inputs``, mostly one of their values
    (values drawn apart from the inputs seldom meet one); ``often``: in more cases."""
    value = (st.sampled_from(["x", "z", "xy", "zz"]) if op in STRING_OPS
             else st.integers(-5, 20))
    value = or_an_input_value(value, inputs)
    p = {}
    if draw(st.integers(0, 1 if often else 2)) == 0:
        p[prefix + "none_on"] = draw(value)
    if draw(st.integers(0, 2 if often else 4)) == 0:
        p[prefix + "raise_on"] = draw(value)
    return p


def or_an_input_value(value: st.SearchStrategy[Any], inputs: list[dict] | None
                      ) -> st.SearchStrategy[Any]:
    """``value``, or one of the non-null values of ``inputs`` (if any)."""
    seen = sorted({i["value"] for i in inputs or () if i.get("value") is not None}, key=str)
    return st.one_of(st.sampled_from(seen), value) if seen else value


def store_named() -> st.SearchStrategy[dict[str, Any]]:
    """The aggregation's store named ``store`` (``{}``) or now and then by the DSL (a generated
    name, in the topology's description, the changelog topic and, for a table aggregation, the
    repartition topic)."""
    return st.sampled_from([{}, {}, {}, {"store_named": False}])


def kspark_minimum(shape: str, p: dict[str, Any]) -> int:
    """The smallest retention the windows allow (size/gap + grace; sliding 2 * diff + grace)."""
    if shape == "session":
        return p["gap"] + p["grace"]
    if shape == "sliding":
        return 2 * p["diff"] + p["grace"]
    return p["size"] + p["grace"]


def join_value() -> st.SearchStrategy[Any]:
    return st.one_of(st.text(alphabet="xyz", min_size=1, max_size=2), st.none())


@st.composite
def joiner_misbehaving(draw: st.DrawFn, alphabet: str) -> dict[str, Any]:
    """Now and then a left value on which the joiner returns null (``none_on``) and one on which
    it fails (``raise_on``; see ``misbehaving``)."""
    value = st.text(alphabet=alphabet, min_size=1, max_size=2)
    p = {}
    if draw(st.integers(0, 3)) == 0:
        p["none_on"] = draw(value)
    if draw(st.integers(0, 5)) == 0:
        p["raise_on"] = draw(value)
    return p


@st.composite
def join_records(draw: st.DrawFn, topics: tuple[str, ...], max_size: int = 24,
                 value: st.SearchStrategy[Any] | None = None,
                 null_keys: bool = True) -> list[dict]:
    """Records on ``topics`` (keys colliding, some null; values some null), timestamps out of
    order, late and with jumps."""
    n = draw(st.integers(0, max_size))
    stamps = draw(timestamps(n))
    key = st.one_of(st.sampled_from(KEYS), st.none()) if null_keys else st.sampled_from(KEYS)
    values = value if value is not None else join_value()
    return [{"topic": draw(st.sampled_from(topics)), "key": draw(key), "value": draw(values),
             "ts": ts} for ts in stamps]


def selecting_value() -> st.SearchStrategy[Any]:
    """Values whose first character names another table's key (``a``, ``b``, ``c``; ``n``:
    none), or null."""
    return st.one_of(st.text(alphabet="abcn", min_size=1, max_size=2), st.none())
