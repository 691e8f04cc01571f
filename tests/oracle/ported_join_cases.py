"""Join cases ported from Kafka Streams 4.3.1's own unit tests (see ``ported_cases.py``): the
stream-stream, stream-table, stream-global-table, table-table and foreign-key join tests, their
keys (integers as strings), values (``"A0"``-style; the outer-join tests' long right values as
strings) and timestamps. The joiner of every join shape is ``left + "+" + right``, as the
tests' ``MockValueJoiner.TOSTRING_JOINER``.
"""

from __future__ import annotations

from typing import Any

from ported_cases import r, variants

KEYS = ["0", "1", "2", "3"]


def each(topic: str, prefix: str, ts: int, keys: list[str] = KEYS, step: int = 0,
         key_prefix: str = "") -> list[dict[str, Any]]:
    """One record per key on ``topic``: value ``prefix + key``, at ``ts`` (``+ i * step``)."""
    return [r(key_prefix + k, prefix + k, ts + i * step, topic) for i, k in enumerate(keys)]


L, R = "left", "right"


def stream_join(source: str, params: dict[str, Any], inputs: list[dict[str, Any]],
                kinds: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """A stream-stream join test, of its own kind unless ``kinds``, with and without its
    changelogs. With null values on RocksDB (the normalisation of
    ``oracle_cases.stream_join_case``: Kafka Streams' in-memory window store moves its time on
    a null put), else in memory."""
    nulls = any(i["value"] is None for i in inputs)
    base = {**params, "store_type": "rocksdb" if nulls else "in_memory"}
    kind = base.pop("kind")
    cases = variants(source, "stream_join", inputs, base, kind=list(kinds or (kind,)))
    first = cases[0]
    # and through a repartition topic (left side re-keyed), with a named store, changelogs shown
    rekeyed = {**first, "changelogs": True,
               "params": {**first["params"], "store_name": "joined"}
               | ({} if first["params"].get("self") else {"rekey_left": True})}
    return [*cases, {**first, "changelogs": True}, rekeyed]


def _upper_lower(inner: str, outer: str, t: int, last: int) -> list[dict[str, Any]]:
    """testUpperWindowBound then testLowerWindowBound of the left and outer join tests: records
    at the window's edges (``t`` + 100 and 100 ms before ``t``, each one ms apart), each
    followed by a record that closes them (301 ms, then ``last`` ms later)."""
    out = [r(k, "b" + k, t + i, inner) for i, k in enumerate(KEYS)]
    for n, prefix in enumerate("BCDEF"):
        out += each(outer, prefix, t + 100 + n)
    out.append(r("0", "dummy", t + 104 + 301, outer))
    for n, prefix in enumerate("GHIJK"):
        out += each(outer, prefix, t - 101 + n)
    out.append(r("0", "dummy", t - 101 + 4 + last, outer))
    return out


J = "KStreamKStreamJoinTest."
LJ = "KStreamKStreamLeftJoinTest."
OJ = "KStreamKStreamOuterJoinTest."
_JOIN_PHASES = (each(L, "A", 0, KEYS[:2]) + each(R, "a", 0, KEYS[:2]) + each(L, "B", 0)
                + each(R, "b", 0) + each(L, "C", 0) + each(R, "c", 0, KEYS[:2]))
_WINDOWING = (each(L, "A", 0, KEYS[:2]) + each(R, "a", 0, KEYS[:2])
              + each(L, "B", 1000, step=1)
              + [rec for n, p in enumerate("bcdef") for rec in each(R, p, 1100 + n)]
              + [rec for n, p in enumerate("ghijk") for rec in each(R, p, 899 + n)]
              + each(R, "l", 2000, step=1)
              + [rec for n, p in enumerate("CDEFG") for rec in each(L, p, 2100 + n)]
              + [rec for n, p in enumerate("HIJKL") for rec in each(L, p, 1899 + n)])


def _asymmetric(first: int, second: int) -> list[dict[str, Any]]:
    """The asymmetric windowing tests: A0..A3 at 1000..1003, then the right side's records of
    every key at five times from ``first`` and five from ``second``, 1 ms apart."""
    return (each(L, "A", 1000, step=1)
            + [rec for n, p in enumerate("abcde") for rec in each(R, p, first + n)]
            + [rec for n, p in enumerate("fghij") for rec in each(R, p, second + n)])


_RUN_LEFT = (each(L, "A", 0, KEYS[:2]) + each(R, "a", 0, KEYS[:2]) + each(L, "B", 0, KEYS[:3])
             + each(R, "b", 0) + each(L, "C", 0) + [r("0", "dummy", 1000, L)])
_EDGES = each(L, "A", 0, KEYS[:2]) + each(R, "a", 0)
_SELF = [r(k, v, t, L) for k, v, t in [("A", "1", 1), ("B", "1", 2), ("A", "2", 3),
                                        ("B", "2", 4), ("B", "3", 5)]]
_SELF_SECONDS = [r(k, v, t, L) for k, v, t in [
    ("A", "1", 0), ("A", "2", 11_000), ("B", "1", 12_000), ("A", "3", 13_000),
    ("A", "4", 15_000), ("C", "1", 16_000), ("D", "1", 17_000), ("A", "5", 30_000)]]
_SELF_OUT_OF_ORDER = [r(k, v, t, L) for k, v, t in [
    ("A", "1", 0), ("A", "2", 9999), ("B", "1", 11_000), ("A", "3", 13_000), ("A", "4", 15_000),
    ("C", "1", 16_000), ("D", "1", 17_000), ("A", "5", 30_000), ("A", "5", 6000)]]
STREAM_JOIN_CASES = [
    *stream_join(J + "testJoin", {"kind": "inner", "diff": 100}, _JOIN_PHASES,
                 ("inner", "left", "outer")),
    *stream_join(J + "testOuterJoin", {"kind": "outer", "diff": 100, "grace": 24 * 3600_000},
                 _JOIN_PHASES),
    *stream_join(J + "testWindowing", {"kind": "inner", "diff": 100}, _WINDOWING,
                 ("inner", "left", "outer")),
    *stream_join(J + "testAsymmetricWindowingAfter", {"kind": "inner", "diff": 0, "after": 100},
                 _asymmetric(999, 1100), ("inner", "left", "outer")),
    *stream_join(J + "testAsymmetricWindowingBefore",
                 {"kind": "inner", "diff": 0, "before": 100}, _asymmetric(899, 1000),
                 ("inner", "left", "outer")),
    *stream_join(J + "runJoin", {"kind": "inner", "diff": 100},
                 [r("A", "1", 1, L), r("B", "1", 2, L), r("A", "1", 1, R), r("B", "2", 2, R)]),
    *stream_join(LJ + "testLeftJoinDuplicates", {"kind": "left", "diff": 100, "grace": 10},
                 [r("0", "A0", 0, L), r("0", "A0-0", 0, L), r("1", "a0", 111, R),
                  r("2", "dummy", 500, R), r("2", "A2", 1000, L), r("2", "A2-0", 1000, L),
                  r("2", "a2", 1001, R), r("3", "a3", 315, R)]),
    *stream_join(LJ + "testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
                 {"kind": "left", "diff": 100, "grace": 0},
                 [r("0", "A0", 1, L), r("1", "A1", 2, L), r("0", "A0-0", 3, L),
                  r("1", "a1", 3, R), r("2", "dummy", 401, L), r("2", "dummy", 401, R)]),
    *stream_join(LJ + "testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
                 {"kind": "left", "diff": 100, "grace": 0},
                 [r("0", "A0", 1, L), r("1", "A1", 2, L), r("0", "A0-0", 3, L),
                  r("1", "a1", 3, R), r("2", "dummy", 401, R), r("2", "dummy", 402, L)]),
    *stream_join(LJ + "testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor",
                 {"kind": "left", "diff": 100, "grace": 0},
                 [r("0", "A0", 1, R), r("1", "A1", 2, R), r("0", "A0-0", 3, R),
                  r("1", "a1", 3, L), r("2", "dummy", 401, L), r("2", "dummy", 402, R)]),
    *stream_join(LJ + "testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor",
                 {"kind": "left", "diff": 100},
                 [r("0", "A0", 1, R), r("1", "A1", 2, R), r("0", "A0-0", 3, R),
                  r("1", "a1", 3, L), r("2", "dummy", 401, R), r("2", "dummy", 402, L)]),
    *stream_join(LJ + "testLeftJoinedRecordsWithZeroAfterAreEmitted",
                 {"kind": "left", "diff": 100, "after": 0},
                 each(L, "A", 1000, step=1)
                 + [rec for n, p in enumerate("abcde") for rec in each(R, p, 999 + n)]
                 + each(R, "f", 1100)),
    *stream_join(LJ + "runLeftJoin", {"kind": "left", "diff": 100}, _RUN_LEFT),
    *stream_join(LJ + "testLeftJoinWithInMemoryCustomSuppliers",
                 {"kind": "left", "diff": 100, "grace": 0}, _RUN_LEFT),
    *stream_join(LJ + "testOrdering", {"kind": "left", "diff": 100},
                 [r("0", "A0", 0, L), r("1", "A1", 100, L), r("1", "a1", 110, R)]),
    *stream_join(LJ + "testGracePeriod", {"kind": "left", "diff": 100, "grace": 10},
                 each(L, "A", 0, KEYS[:2]) + each(R, "a", 101) + [r("0", "dummy", 1201, R)]),
    *stream_join(LJ + "testWindowing", {"kind": "left", "diff": 100},
                 _EDGES + _upper_lower(R, L, 1000, 300)),
    *stream_join(LJ + "shouldNotEmitLeftJoinResultForAsymmetricWindow",
                 {"kind": "left", "diff": 100, "before": 0},
                 [*each(L, "A", 0, KEYS[:2], step=1), r("0", "a0", 100, R),
                  r("1", "a1", 102, R)]),
    *stream_join(OJ + "testOuterJoinDuplicates", {"kind": "outer", "diff": 100, "grace": 10},
                 [r("0", "A0", 0, L), r("0", "A0-0", 0, L), r("1", "11", 0, R),
                  r("1", "12", 0, R), r("1", "10", 111, R), r("3", "100", 211, R),
                  r("2", "A2", 200, L), r("2", "A2-0", 200, L), r("2", "13", 201, R),
                  r("2", "14", 201, R), r("3", "100", 1500, R)]),
    *stream_join(OJ + "testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
                 {"kind": "outer", "diff": 100},
                 [r("0", "A0", 1, L), r("1", "A1", 2, L), r("0", "A0-0", 3, L),
                  r("1", "11", 3, R), r("2", "dummy", 401, L), r("2", "100", 401, R)]),
    *stream_join(OJ + "testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
                 {"kind": "outer", "diff": 100, "grace": 0},
                 [r("0", "A0", 1, L), r("1", "A1", 2, L), r("0", "A0-0", 3, L),
                  r("1", "11", 3, R), r("2", "100", 401, R), r("2", "dummy", 402, L)]),
    *stream_join(OJ + "testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
                 {"kind": "outer", "diff": 100},
                 [r("0", "10", 1, R), r("1", "11", 2, R), r("0", "12", 3, R),
                  r("1", "A1", 3, L), r("2", "dummy", 401, L), r("2", "100", 402, R)]),
    *stream_join(OJ + "testRightExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
                 {"kind": "outer", "diff": 100, "grace": 0},
                 [r("0", "10", 1, R), r("1", "11", 2, R), r("0", "12", 3, R),
                  r("1", "A1", 3, L), r("2", "100", 401, R), r("2", "dummy", 402, L)]),
    *stream_join(OJ + "testOrdering", {"kind": "outer", "diff": 100},
                 [r("0", "A0", 0, L), r("1", "A1", 100, L), r("1", "11", 110, R)]),
    *stream_join(OJ + "testGracePeriod", {"kind": "outer", "diff": 100, "grace": 10},
                 [r("0", "A0", 0, L), r("1", "11", 0, R), r("1", "A1", 101, L),
                  r("0", "10", 101, R), r("0", "100", 112, R)]),
    *stream_join(OJ + "testEmitAllNonJoinedResultsForAsymmetricWindow",
                 {"kind": "outer", "diff": 5, "after": 20},
                 [r("0", "A0", 29, L), r("1", "A1", 30, L), r("2", "12", 31, R),
                  r("3", "13", 36, R), r("4", "14", 37, R), r("5", "15", 50, R)]),
    *stream_join(OJ + "runOuterJoin", {"kind": "outer", "diff": 100},
                 each(L, "A", 0, KEYS[:2]) + each(R, "1", 0, KEYS[:2]) + each(L, "B", 0, KEYS[:3])
                 + each(R, "2", 0) + each(L, "C", 0) + [r("0", "dummy", 400, L)]),
    *stream_join(OJ + "testWindowing", {"kind": "outer", "diff": 100},
                 _EDGES + _upper_lower(R, L, 1000, 200)),
    *stream_join(OJ + "testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow",
                 {"kind": "outer", "diff": 100, "before": 0},
                 [*each(L, "A", 0, KEYS[:2], step=1), r("0", "10", 100, R), r("1", "11", 102, R),
                  r("2", "12", 103, R), r("2", "A2", 103, L)]),
    *stream_join(OJ + "testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow",
                 {"kind": "outer", "diff": 100, "after": 0},
                 [*each(L, "A", 0, KEYS[:2], step=1), r("1", "11", 1, R), r("2", "12", 101, R),
                  r("3", "13", 101, R), r("2", "A2", 201, L)]),
    # KStreamKStreamSelfJoinTest: the stream joined with itself (``self``), and as two
    # streams each of which gets every record (the test's shouldMatchInnerJoinWithSelfJoin-
    # WithTwoStreams compares the two)
    *[c for src, params, inputs in [
        ("shouldMatchInnerJoinWithSelfJoinWithSingleStream", {"diff": 100}, _SELF),
        ("shouldMatchInnerJoinWithSelfJoinDifferentBeforeAfterWindows",
         {"diff": 11_000, "grace": 10_000}, _SELF_SECONDS),
        ("shouldMatchInnerJoinWithSelfJoinOutOfOrderMessages", {"diff": 10_000},
         _SELF_OUT_OF_ORDER)]
      for self in (True, False) for c in stream_join(
          "KStreamKStreamSelfJoinTest." + src, {"kind": "inner", **params, "self": self},
          inputs if self else [x for i in inputs for x in (i, {**i, "topic": R})])],
]

# -- KStreamKTableJoinTest / KStreamKTableLeftJoinTest -----------------------------------------
KT = "KStreamKTableJoinTest."


def _stream(prefix: str, n: int = 4) -> list[dict[str, Any]]:
    """pushToStream: key i at time i."""
    return each(L, prefix, 0, KEYS[:n], step=1)


def _table(prefix: str, n: int = 4, ts: int = 0) -> list[dict[str, Any]]:
    """pushToTableNonRandom: key i at ``ts``."""
    return each(R, prefix, ts, KEYS[:n])


#: pushToTable's random timestamps below Integer.MAX_VALUE, drawn once
_RANDOM_TS = [1_804_289_383, 846_930_886, 1_681_692_777, 1_714_636_915]


def _random_table(prefix: str, n: int = 4, shift: int = 0) -> list[dict[str, Any]]:
    """pushToTable: key i at a random time (here fixed; ``shift`` moves them)."""
    return [r(k, prefix + k, _RANDOM_TS[(i + shift) % 4], R) for i, k in enumerate(KEYS[:n])]


_TABLE_UPDATES = (_stream("X", 2) + _random_table("Y", 2) + _stream("X")
                  + _random_table("YY", 4, 1) + _stream("X") + _random_table("YYY", 4, 2))
_TABLE_TESTS = {
    KT + "shouldNotJoinWithEmptyTableOnStreamUpdates": _stream("X", 2),
    KT + "shouldNotJoinOnTableUpdates": _TABLE_UPDATES,
    KT + "shouldJoinOnlyIfMatchFoundOnStreamUpdates": _random_table("Y", 2) + _stream("X"),
    KT + "shouldClearTableEntryOnNullValueUpdates":
        _random_table("Y") + _stream("X") + [r(k, None, 0, R) for k in KEYS[:2]]
        + _stream("XX"),
    KT + "shouldLogAndMeterWhenSkippingNullLeftKey": [*_table("Y"), r(None, "A", 0, L)],
    KT + "shouldLogAndMeterWhenSkippingNullLeftValue": [*_table("Y"), r("1", None, 0, L)],
}
_GRACE_TESTS = {
    KT + "shouldDelayJoinByGracePeriod":
        _table("Y") + _stream("X") + _table("YY") + _stream("X") + [r("5", "test", 7, L)]
        + _table("YYY"),
    KT + "shouldHandleLateJoinsWithGracePeriod": _table("Y") + _stream("X") + _stream("X", 1),
}
STREAM_TABLE_CASES = [
    *[c for source, inputs in _TABLE_TESTS.items()
      for c in variants(source, "stream_table_join", inputs, {"store_type": "in_memory"},
                        kind=["inner", "left"], table_caching=[False, True])],
    # shouldReuseRepartitionTopicWithGeneratedName: the stream re-keyed before the join
    *[c for source, inputs in _TABLE_TESTS.items()
      for c in variants(source + "(shouldReuseRepartitionTopicWithGeneratedName)",
                        "stream_table_join", inputs, {"store_type": "in_memory",
                                                      "rekey_left": True},
                        kind=["inner", "left"])],
    *[c for source, inputs in _GRACE_TESTS.items()
      for c in variants(source, "stream_table_join", inputs,
                        {"versioned": 5 * 60_000, "grace": 2}, kind=["inner", "left"])],
    *[c for source, inputs in _TABLE_TESTS.items() if "NullLeft" not in source
      for c in variants(source + "(versioned)", "stream_table_join", inputs,
                        {"versioned": 5 * 60_000}, kind=["inner", "left"])],
]

# -- KStreamGlobalKTableJoinTest / KStreamGlobalKTableLeftJoinTest -----------------------------
# the tests' key mapper reads the foreign key "FKey<i>" from the stream's value; the shape's
# selector reads the value's first character, so the global table's keys are the digits and a
# value without a foreign key starts with "n"
GT = "KStreamGlobalKTableJoinTest."


def _global_stream(prefix: str, n: int = 4, foreign_key: bool = True,
                   null_key: bool = False) -> list[dict[str, Any]]:
    return [r(None if null_key and i == 0 else k, (k if foreign_key else "n") + prefix + k,
              0, L) for i, k in enumerate(KEYS[:n])]


_GLOBAL_TESTS = {
    GT + "shouldNotJoinWithEmptyGlobalTableOnStreamUpdates": _global_stream("X", 2),
    GT + "shouldNotJoinOnGlobalTableUpdates":
        _global_stream("X", 2) + _table("Y", 2) + _global_stream("X") + _table("YY")
        + _global_stream("X") + _table("YYY"),
    GT + "shouldJoinOnlyIfMatchFoundOnStreamUpdates": _table("Y", 2) + _global_stream("X"),
    GT + "shouldClearGlobalTableEntryOnNullValueUpdates":
        _table("Y") + _global_stream("X") + [r(k, None, 0, R) for k in KEYS[:2]]
        + _global_stream("XX"),
    GT + "shouldNotJoinOnNullKeyMapperValues": _table("Y") + _global_stream("XXX", 4, False),
    GT + "shouldNotJoinOnNullKeyMapperValuesWithNullKeys":
        _table("Y") + _global_stream("XXX", 4, False, True),
    GT + "shouldJoinOnNullKey": _table("Y", 2) + _global_stream("X", 4, True, True),
}
GLOBAL_CASES = [c for source, inputs in _GLOBAL_TESTS.items()
                for c in variants(source, "global_join", inputs, {"store_type": "in_memory"},
                                  kind=["inner", "left"])]

# -- KTableKTable{Inner,Left,Outer}JoinTest: one sequence, every kind --------------------------
TT = "KTableKTable{Inner,Left,Outer}JoinTest.testJoin"
_TT_INPUTS = ([r(k, "X" + k, 5 + i, L) for i, k in enumerate(KEYS[:2])]
              + [r(None, "SomeVal", 42, L)]
              + [r(k, "Y" + k, 10 * i, R) for i, k in enumerate(KEYS[:2])]
              + [r(None, "AnotherVal", 73, R)] + each(L, "XX", 7)
              + [r(k, "YY" + k, int(k) * 5, R) for k in KEYS] + each(L, "XXX", 6)
              + [r("0", None, 5, R), r("1", None, 7, R)] + each(L, "XXXX", 13)
              + [r("0", None, 0, L), r("1", None, 42, L), r("2", None, 5, L),
                 r("3", None, 20, L)])
TABLE_JOIN_CASES = [
    *variants(TT, "table_join", _TT_INPUTS, {"store_type": "in_memory"},
              kind=["inner", "left", "outer"], left_caching=[False, True],
              right_caching=[False, True]),
    *variants(TT + "(queryable)", "table_join", _TT_INPUTS,
              {"store_type": "in_memory", "materialized": True},
              kind=["inner", "left", "outer"], result_caching=[False, True]),
    *[{**c, "changelogs": True} for c in variants(
        TT + "(changelogs)", "table_join", _TT_INPUTS,
        {"materialized": True, "left_caching": False, "right_caching": False,
         "result_caching": False}, kind=["inner", "left", "outer"])],
]

# -- KTableKTableForeignKeyJoinScenarioTest: the value's first character is the foreign key ---
FK = "KTableKTableForeignKeyJoinScenarioTest."
_FK_TESTS = {
    FK + "shouldUseExpectedTopicsWithSerde": [r("2", "1|lhsValue1", 0, L),
                                              r("1", "rhsValue1", 0, R)],
    FK + "shouldWorkWithCompositeKeyAndProducerIdInValue":
        [r("1:a", "1|a-data", 0, L), r("1:b", "1|b-data", 0, L), r("2:a", "2|a-data", 0, L),
         r("1", "1-data", 0, R), r("2", "2-data", 0, R)],
    FK + "shouldWorkWithDefaultSerdes": [r("1", "9-alpha", 0, L), r("9", "beta", 0, R)],
    # the tables' own updates afterwards: the left row changes its foreign key, then both go
    FK + "shouldWorkWithDefaultSerdes(updates)":
        [r("1", "9-alpha", 0, L), r("9", "beta", 0, R), r("1", "8-alpha", 1, L),
         r("8", "gamma", 2, R), r("9", None, 3, R), r("1", "n", 4, L), r("1", None, 5, L)],
}
FK_CASES = [c for source, inputs in _FK_TESTS.items()
            for c in variants(source, "fk_join", inputs, {"store_type": "in_memory"},
                              kind=["inner", "left"], materialized=[False, True],
                              left_caching=[False, True])]

# -- KTableKTableForeignKeyJoinIntegrationTest (streams/integration-tests): foreign keys rhs1,
# rhs2, rhs3 as a, b, c, the first character of the left value; "n" for the extractor's null
FKI = "KTableKTableForeignKeyJoinIntegrationTest."
_RHS = [r("a", "rhsValue1", 0, R), r("b", "rhsValue2", 1, R)]
_FK_INTEGRATION = {
    "doJoinFromLeftThenDeleteLeftEntity":
        [*_RHS, r("c", "rhsValue3", 2, R), r("lhs1", "a|lhsValue1", 3, L),
         r("lhs2", "b|lhsValue2", 4, L), r("lhs3", "a|lhsValue3", 5, L), r("lhs1", None, 6, L)],
    "doJoinFromLeftThenUpdateFkThenRevertBack":
        [*_RHS, r("lhs1", "a|lhsValue1", 3, L), r("lhs1", "b|lhsValue1", 5, L),
         r("lhs1", "a|lhsValue1", 6, L)],
    "doJoinFromRightThenDeleteRightEntity":
        [r("lhs1", "a|lhsValue1", 0, L), r("lhs2", "b|lhsValue2", 1, L),
         r("lhs3", "a|lhsValue3", 2, L), r("a", "rhsValue1", 3, R), r("b", "rhsValue2", 4, R),
         r("c", "rhsValue3", 5, R), r("a", None, 6, R)],
    "shouldEmitTombstoneWhenDeletingNonJoiningRecords":
        [r("lhs1", "a|lhsValue1", 0, L), r("lhs1", None, 1, L), r("lhs1", None, 2, L)],
    "shouldNotEmitTombstonesWhenDeletingNonExistingRecords": [r("lhs1", None, 0, L)],
    "joinShouldProduceNullsWhenValueHasNonMatchingForeignKey":
        [r("lhs1", "a|lhsValue1", 0, L), r("lhs1", "b|lhsValue1", 1, L),
         r("lhs1", "c|lhsValue1", 2, L), r("a", "rhsValue1", 3, R),
         r("lhs1", "a|lhsValue1", 4, L), r("lhs1", "b|lhsValue1", 5, L)],
    "shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated":
        [*_RHS, r("lhs1", "a|lhsValue1", 2, L), r("lhs1", "b|lhsValue1", 3, L),
         r("a", "rhsValue1Delta", 4, R)],
    "shouldEmitRecordOnNullForeignKeyForLeftJoins": [r("lhs1", "n|lhsValue1", 0, L)],
    "shouldEmitRecordWhenOldAndNewFkDiffer":
        [r("lhs1", "a|lhsValue1", 0, L), r("lhs1", "n|returnNull", 0, L)],
}
_OUT_OF_ORDER = [
    r("a", "rhsValue1", 4, R), r("lhs1", "a|lhsValue1", 3, L), r("lhs2", "a|lhsValue2", 5, L),
    r("lhs2", None, 6, L), r("lhs1", "a|lhsValue1_ooo", 2, L), r("lhs2", "a|lhsValue2_ooo", 2, L),
    r("lhs1", None, 2, L), r("lhs1", "a|lhsValue1_new", 8, L), r("lhs2", "a|lhsValue2_new", 8, L),
    r("a", "rhsValue1_ooo", 1, R), r("a", None, 1, R), r("a", "rhsValue1_new", 6, R)]
FK_CASES += [c for method, inputs in _FK_INTEGRATION.items()
             for c in variants(FKI + method, "fk_join", inputs,
                               {"store_type": "in_memory", "result_caching": False},
                               kind=["inner", "left"], materialized=[False, True])]
FK_CASES += variants(FKI + "shouldIgnoreOutOfOrderRecordsIffVersioned", "fk_join", _OUT_OF_ORDER,
                     {"result_caching": False}, kind=["inner", "left"],
                     materialized=[False, True], left_versioned=[None, 5 * 60_000],
                     right_versioned=[None, 5 * 60_000])
FK_CASES += [{**c, "changelogs": True} for c in variants(
    FKI + "shouldIgnoreOutOfOrderRecordsIffVersioned(changelogs)", "fk_join", _OUT_OF_ORDER,
    {"materialized": True, "result_caching": False, "left_versioned": 5 * 60_000},
    kind=["inner", "left"])]

# -- AbstractJoinIntegrationTest (streams/integration-tests): one key, values with nulls, out of
# order, run through Stream{Stream,Table}JoinIntegrationTest and TableTableJoinIntegrationTest
AJ = "(AbstractJoinIntegrationTest.input)"
_AJ = [(L, None, 1), (R, None, 2), (L, "A", 3), (R, "a", 4), (L, "B", 5), (R, "b", 6),
       (L, None, 7), (R, None, 8), (L, "C", 9), (R, "c", 10), (R, None, 11), (L, None, 12),
       (R, None, 13), (R, "d", 7), (L, "D", 6), (L, None, 2), (R, None, 3), (R, "e", 14),
       (L, "E", 15), (L, None, 10), (R, None, 9), (L, "F", 4), (R, "f", 3)]
_AJ_INPUT = [r("0", v, t, topic) for topic, v, t in _AJ]
_AJ_IN_ORDER = ([r("0", v, t, topic) for topic, v, t in _AJ[:13]]
                + [r("0", "d", 14, R), r("0", "D", 15, L), r(None, "E", 16, L),
                   r(None, "e", 17, R)])
_HOUR = 3_600_000
INTEGRATION_CASES = [
    *stream_join("StreamStreamJoinIntegrationTest.test{Inner,Left,Outer}(inputWithoutOutOfOrderData)",
                 {"kind": "inner", "diff": 10_000}, _AJ_IN_ORDER, ("inner", "left", "outer")),
    *stream_join("StreamStreamJoinIntegrationTest.test{Inner,Left,Outer}(input)",
                 {"kind": "inner", "diff": 10_000, "grace": _HOUR}, _AJ_INPUT,
                 ("inner", "left", "outer")),
    *stream_join("StreamStreamJoinIntegrationTest.testSelfJoin",
                 {"kind": "inner", "diff": 10_000, "self": True},
                 [r("0", v, t, L) for v, t in [(None, 1), ("A", 2), ("B", 3), (None, 4),
                                               ("C", 5), (None, 6), ("D", 7)]]),
    *variants("StreamTableJoinIntegrationTest.test{Inner,Left}" + AJ, "stream_table_join",
              _AJ_INPUT,
              {"store_type": "in_memory"}, kind=["inner", "left"], table_caching=[False, True]),
    *variants("StreamTableJoinWithGraceIntegrationTest.test{Inner,Left}" + AJ,
              "stream_table_join",
              _AJ_INPUT, {"versioned": 60_000}, kind=["inner", "left"], grace=[None, 2]),
    *variants("TableTableJoinIntegrationTest.test{Inner,Left,Outer}" + AJ, "table_join",
              _AJ_INPUT,
              {"store_type": "in_memory", "materialized": True},
              kind=["inner", "left", "outer"], left_caching=[False, True],
              result_caching=[False, True]),
    *variants("TableTableJoinIntegrationTest.test{Inner,Left,Outer}" + AJ + "(versioned)",
              "table_join", _AJ_INPUT,
              {"materialized": True, "result_caching": False},
              kind=["inner", "left", "outer"], left_versioned=[None, 60_000],
              right_versioned=[None, 60_000]),
    *variants(TT + "(versioned)", "table_join", _TT_INPUTS, {"result_caching": False},
              kind=["inner", "left", "outer"], materialized=[False, True],
              left_versioned=[60_000], right_versioned=[None, 60_000]),
]

#: every ported join case
JOIN_CASES = (STREAM_JOIN_CASES + STREAM_TABLE_CASES + GLOBAL_CASES + TABLE_JOIN_CASES
              + FK_CASES + INTEGRATION_CASES)
