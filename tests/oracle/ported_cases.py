"""Differential cases ported from Kafka Streams 4.3.1's own unit tests (the input sequences and
topology shapes of ``streams/src/test/java/org/apache/kafka/streams/kstream/internals/``),
written in the oracle's case format (``tests/oracle/README.md``).

Each case names the test it was ported from in ``source`` (``Class.method``); the inputs are
the test's own keys, timestamps and order (integer keys as strings, ``"A0"``-style values as
they are where the shape's values are strings, else a long standing for each value). Where a
shape cannot express the test's topology, the nearest shape runs the same inputs and the
comment says what differs. A test is usually run under several of its shape's parameters
(emit strategy, caching, join kind, materialization): ``variants``.

The oracle's normalisations of ``comparison.py`` apply here too (``windowed``): with caching
on (emit on update) and with on_window_close of time and sliding windows the stores get a
retention that expires nothing, on_window_close runs the oracle on RocksDB, stream-stream joins
always on RocksDB. The join cases are in ``ported_join_cases.py``.
"""

from __future__ import annotations

import itertools
from typing import Any

from comparison import LONG_RETENTION

GAP = 5 * 60 * 1000  # KStreamSessionWindowAggregateProcessorTest's inactivity gap


def r(key: str | None, value: Any, ts: int, topic: str | None = None) -> dict[str, Any]:
    """One input record (on ``topic``, else the shape's ``in``)."""
    rec: dict[str, Any] = {"key": key, "value": value, "ts": ts}
    if topic is not None:
        rec["topic"] = topic
    return rec


def seq(key: str, stamps: list[int], values: list[Any] | None = None,
        topic: str | None = None) -> list[dict[str, Any]]:
    """Records of one key at ``stamps`` (values ``"1"``, ``"2"``, ... unless given)."""
    values = values if values is not None else [str(i) for i in range(1, len(stamps) + 1)]
    return [r(key, v, t, topic) for v, t in zip(values, stamps, strict=True)]


def counted(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``inputs`` with each non-null value as the long 1 (for ``count`` and the long ops)."""
    return [{**i, "value": None if i.get("value") is None else 1} for i in inputs]


def variants(source: str, shape: str, inputs: list[dict[str, Any]], base: dict[str, Any], /,
             **grid: list[Any]) -> list[dict[str, Any]]:
    """One case per combination of ``grid``'s parameter values on top of ``base``."""
    names = sorted(grid)
    cases = []
    for combo in itertools.product(*(grid[n] for n in names)):
        params = {**base, **dict(zip(names, combo, strict=True))}
        cases.append({"source": source, "shape": shape, "params": params, "inputs": inputs})
    return cases


FINAL = {"type": "window_close"}


def closing(inputs: list[dict[str, Any]], p: dict[str, Any]) -> dict[str, Any]:
    """The first record after ``inputs`` that closes all their windows (1 ms past the latest
    window end + grace), so that the final results show (the tests with emit on window close
    mostly look at the store instead). No further: Kafka Streams' session store would drop the
    segments of sessions that close and expire on one record (README "Deviations")."""
    span = next(p[n] for n in ("gap", "size", "diff") if n in p)
    last = max(i["ts"] for i in inputs) + span + p.get("grace", 0) + 1
    return r("zz-close", inputs[-1]["value"], last, inputs[-1].get("topic"))


def windowed(source: str, shape: str, inputs: list[dict[str, Any]], base: dict[str, Any],
             emits: tuple[str, ...] = ("update", "close"),
             cachings: tuple[bool, ...] = (False, True),
             ops: tuple[str, ...] = ("concat", "count"),
             close: bool = True) -> list[dict[str, Any]]:
    """A windowed test under each emit strategy, caching and op (``concat`` on the test's
    string values, the long ops on :func:`counted` ones), normalised as ``comparison``'s
    random cases are (module doc); final results are followed by a :func:`closing` record
    unless not ``close``."""
    cases = []
    for emit, caching, op in itertools.product(emits, cachings, ops):
        p = {"op": op, **base, "emit": emit, "caching": caching}
        if (caching and emit == "update") or (emit == "close" and shape != "session"):
            span = next(p[n] for n in ("gap", "size", "diff") if n in p)
            p["retention"] = max(LONG_RETENTION, 2 * (span + p.get("grace", 0)))
        p["store_type"] = "rocksdb" if emit == "close" else "in_memory"
        values = inputs if op in ("concat", "reduce_concat") else counted(inputs)
        if close and (emit == "close" or p.get("suppress") == FINAL):
            values = [*values, closing(values, p)]
        cases.append({"source": source, "shape": shape, "params": p, "inputs": values})
    return cases


# -- KStreamSessionWindowAggregateProcessorTest (gap 5 min, no grace) ---------------------------
S = "KStreamSessionWindowAggregateProcessorTest."
SESSION = {"gap": GAP}
SESSION_CASES = [
    *windowed(S + "shouldCreateSingleSessionWhenWithinGap", "session",
              [r("john", "first", 0), r("john", "second", 500)], SESSION),
    *windowed(S + "shouldMergeSessions", "session",
              [r("mel", "first", 0), r("mel", "second", GAP + 1), r("mel", "third", GAP // 2)],
              SESSION),
    *windowed(S + "shouldUpdateSessionIfTheSameTime", "session",
              [r("mel", "first", 0), r("mel", "second", 0)], SESSION),
    *windowed(S + "shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap", "session",
              seq("mel", [0, GAP + 1, GAP + 1, 2 * GAP + 2, 2 * GAP + 2, 2 * GAP + 2]), SESSION),
    *windowed(S + "shouldRemoveMergedSessionsFromStateStore", "session",
              [r("a", "1", 0), r("a", "2", 100)], SESSION),
    *windowed(S + "shouldHandleMultipleSessionsAndMerging", "session",
              [r(k, "1", 0) for k in "abcd"]
              + [r("d", "2", GAP // 2), r("a", "2", GAP + 1), r("b", "2", GAP + 1),
                 r("a", "3", GAP + 1 + GAP // 2), r("c", "3", GAP + 1 + GAP // 2)], SESSION,
              # no closing record: b's session [GAP + 1, GAP + 1] would close and leave Kafka
              # Streams' retention on the same record, and its RocksDB session store drops the
              # segment before looking for closed sessions (README "Deviations": expired data)
              close=False),
    *windowed(S + "shouldGetAggregatedValuesFromValueGetter", "session",
              [r("a", "1", 0), r("a", "1", GAP + 1), r("a", "2", GAP + 1)], SESSION),
    *windowed(S + "shouldImmediatelyForwardNewSessionWhenNonCachedStore", "session",
              [r(k, "1", 0) for k in "abc"], SESSION, emits=("update",), cachings=(False,)),
    *windowed(S + "shouldImmediatelyForwardRemovedSessionsWhenMerging", "session",
              [r("a", "1", 0), r("a", "1", 5)], SESSION, emits=("update",), cachings=(False,)),
    # a record exactly at a session's end + gap + grace is late (dropped)
    *windowed(S + "shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace", "session",
              [r("dummy", "d", 0), r("OnTime1", "1", 0), r("dummy", "d", 11),
               r("Late1", "1", 0)], {"gap": 10, "grace": 0}),
    *windowed(S + "shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace", "session",
              [r("dummy", "d", 0), r("OnTime1", "1", 0), r("dummy", "d", 11),
               r("OnTime2", "1", 0), r("dummy", "d", 12), r("Late1", "1", 0)],
              {"gap": 10, "grace": 1}),
]

# -- KGroupedStreamImplTest: windowed and plain aggregations of a grouped stream -------------
G = "KGroupedStreamImplTest."
_SESSIONS = [r("1", "A", 10), r("2", "Z", 15), r("1", "B", 30), r("1", "A", 70),
             r("1", "B", 100), r("1", "C", 90)]
GROUPED_CASES = [
    *windowed(G + "shouldCountSlidingWindows", "sliding",
              [r(k, v, t) for k, v, t in
               [("1", "A", 500), ("1", "A", 999), ("1", "A", 600), ("2", "B", 500),
                ("2", "B", 600), ("2", "B", 700), ("3", "C", 501), ("1", "A", 1000),
                ("1", "A", 1000), ("2", "B", 1000), ("2", "B", 1000), ("3", "C", 600)]],
              {"diff": 500, "grace": 2000}),
    *windowed(G + "shouldCountWindowed", "time_window",
              [r(k, v, t) for k, v, t in
               [("1", "A", 0), ("1", "A", 499), ("1", "A", 100), ("2", "B", 0), ("2", "B", 100),
                ("2", "B", 200), ("3", "C", 1), ("1", "A", 500), ("1", "A", 500),
                ("2", "B", 500), ("2", "B", 500), ("3", "B", 100)]],
              {"size": 500, "grace": 100}),
    *windowed(G + "shouldAggregateSessionWindows", "session", _SESSIONS, {"gap": 30},
              ops=("concat", "sum")),
    *windowed(G + "shouldReduceSessionWindows", "session", _SESSIONS, {"gap": 30},
              ops=("reduce_concat", "count")),
    # an inactivity gap of 0: only records at the same time share a session
    *windowed(G + "sessionGapOfZeroShouldOnlyPutRecordsWithSameTsIntoSameSession", "session",
              seq("1", [10, 11, 11, 12]), {"gap": 0}),
    *variants(G + "shouldAggregateAndMaterializeResults", "stream_aggregate",
              [r("1", "A", 5), r("2", "B", 1), r("1", "C", 3), r("1", "D", 10), r("3", "E", 8),
               r("3", "F", 9), r("3", None, 0)], {"store_type": "in_memory"},
              op=["concat", "reduce_concat"], caching=[False, True]),
    *variants(G + "shouldCountAndMaterializeResults", "stream_aggregate",
              counted([r("1", "A", 5), r("2", "B", 1), r("1", "C", 3), r("1", "D", 10),
                       r("3", "E", 8), r("3", "F", 9), r("3", None, 0), r(None, "G", 2)]),
              {"store_type": "in_memory"}, op=["count", "sum", "reduce_max"],
              caching=[False, True]),
]

# -- KStreamAggregationIntegrationTest (streams/integration-tests): user sessions, a late record;
# its SessionWindows.with(gap) has the legacy grace of a day
AG = "KStreamAggregationIntegrationTest."


def _user_sessions(gap: int) -> list[dict[str, Any]]:
    t1, t2, t3 = 3_600_000, 3_600_000 + gap // 2, 3_600_000 + gap + 1
    t4 = t3 + gap // 2
    return ([r(k, v, t1) for k, v in [("bob", "start"), ("penny", "start"), ("jo", "pause"),
                                      ("emily", "pause")]]
            + [r("emily", "resume", t2), r("bob", "pause", t3), r("penny", "stop", t3),
               r("bob", "resume", t4), r("jo", "resume", t4), r("jo", "late", t4 - 1)])


GROUPED_CASES += [
    *windowed(AG + "shouldCountSessionWindows", "session", _user_sessions(GAP),
              {"gap": GAP, "grace": 86_400_000}),
    *windowed(AG + "shouldReduceSessionWindows", "session", _user_sessions(1000),
              {"gap": 1000, "grace": 86_400_000}, ops=("reduce_concat", "count")),
]

# -- KStreamWindowAggregateTest --------------------------------------------------------------
W = "KStreamWindowAggregateTest."
HOPPING = {"size": 10, "advance": 5}
TIME_WINDOW_CASES = [
    *windowed(W + "testAggBasic", "time_window",
              seq("A", [0, 4, 5, 10], ["1"] * 4) + seq("B", [1, 6, 8, 11, 13], ["2"] * 5)
              + seq("C", [2, 9, 14], ["3"] * 3) + seq("D", [3, 7, 12], ["4"] * 3)
              + [r("B", "1", 3), r("B", "2", 2), r("B", "3", 9)], {**HOPPING, "grace": 100}),
    # the test's order (the records of each key interleaved), its emit-on-update grace
    *windowed(W + "testAggBasic", "time_window",
              [r(k, v, t) for k, v, t in
               [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
                ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
                ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
                ("B", "1", 3), ("B", "2", 2), ("B", "3", 9)]], {**HOPPING, "grace": 100}),
    # testJoin: each of the two joined aggregations alone (grace 5 on close, 100 on update)
    *[c for grace, emits in ((5, ("close",)), (100, ("update",))) for c in windowed(
        W + "testJoin(topic1)", "time_window",
        [r(k, v, t) for k, v, t in
         [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9),
          ("A", "1", 15), ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13),
          ("C", "3", 14), ("A", "1", 20)]], {**HOPPING, "grace": grace}, emits=emits)],
    *[c for grace, emits in ((5, ("close",)), (100, ("update",))) for c in windowed(
        W + "testJoin(topic2)", "time_window",
        [r(k, v, t) for k, v, t in
         [("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 10), ("A", "a", 15),
          ("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21)]],
        {**HOPPING, "grace": grace}, emits=emits)],
    # a retention of 100 with grace 90: records at 0..6 after 100 fall out of the store
    *windowed(W + "shouldLogAndMeterWhenSkippingExpiredWindow", "time_window",
              seq("k", [100, 0, 1, 2, 3, 4, 5, 6, 105, 106],
                  ["100", "0", "1", "2", "3", "4", "5", "6", "105", "106"]),
              {**HOPPING, "grace": 90, "retention": 100}, emits=("update",), cachings=(False,)),
    *windowed(W + "shouldLogAndMeterWhenSkippingExpiredWindowByGrace", "time_window",
              seq("k", [200, 100, 101, 102, 103, 104, 105, 6],
                  ["100", "0", "1", "2", "3", "4", "5", "6"]),
              {"size": 10, "advance": 10, "grace": 90}),
    *windowed(W + "shouldEmitWithInterval0", "time_window",
              [r("A", "1", 0), r("B", "2", 5), r("C", "3", 15), r("D", "4", 15),
               r("E", "5", 19)], {**HOPPING, "grace": 5}),
    # the test restarts the processor before D@25 (a restart is not expressible: one run)
    *windowed(W + "shouldEmitFromLastEmitTime", "time_window",
              [r("A", "1", 0), r("B", "2", 5), r("C", "3", 15), r("D", "4", 25)],
              {**HOPPING, "grace": 5}),
]

# -- KStreamSlidingWindowAggregateTest --------------------------------------------------------
SL = "KStreamSlidingWindowAggregateTest."
_LARGE = (seq("A", [10, 20, 22, 15], ["1", "2", "3", "4"])
          + seq("B", [12, 13, 18, 19, 25, 14], ["1", "2", "3", "4", "5", "6"])
          + seq("C", [11, 15, 16, 21, 23], ["1", "2", "3", "4", "5"])
          + seq("D", [11, 12, 29, 16], ["4", "2", "3", "5"]))
_EARLY = seq("E", [0, 5, 6, 3, 13, 10, 4, 2, 15], ["1", "3", "4", "2", "6", "5", "7", "8", "9"])
_RANDOM = list(zip("ABCDEFGHIJKLMNOPQRSTU", [10, 15, 16, 18, 30, 40, 55, 56, 58, 58, 62, 63, 63,
                                             63, 76, 77, 80, 2, 3, 5, 8], strict=True))


def _shuffled(order: list[int]) -> list[dict[str, Any]]:
    """testAggregateRandomInput's records in a fixed order (the test shuffles them at random),
    then ``V`` at 181."""
    return [r("A", _RANDOM[i][0], _RANDOM[i][1]) for i in order] + [r("A", "V", 181)]


SLIDING_CASES = [
    *windowed(SL + "testAggregateSmallInput", "sliding",
              seq("A", [10, 10, 14, 15, 20, 22, 30]), {"diff": 10, "grace": 5}),
    *windowed(SL + "testReduceSmallInput", "sliding",
              seq("A", [10, 14, 15, 22, 26, 30]), {"diff": 10, "grace": 5},
              ops=("reduce_concat", "reduce_sum")),
    *windowed(SL + "testAggregateLargeInput", "sliding", _LARGE, {"diff": 10, "grace": 10},
              emits=("close",)),
    *windowed(SL + "testAggregateLargeInput", "sliding", _LARGE, {"diff": 10, "grace": 50},
              emits=("update",)),
    *windowed(SL + "testJoin(topic1)", "sliding",
              [r("A", "1", 10), r("B", "2", 11), r("C", "3", 12), r("A", "1", 15),
               r("B", "2", 16), r("C", "3", 19)], {"diff": 10, "grace": 0}, emits=("close",)),
    *windowed(SL + "testJoin(topic2)", "sliding",
              [r("A", "a", 10), r("C", "c", 12), r("A", "a", 15), r("B", "b", 16),
               r("C", "c", 17)], {"diff": 10, "grace": 100}, emits=("update",)),
    *windowed(SL + "testEarlyRecordsSmallInput", "sliding",
              seq("A", [0, 5, 6, 3, 13, 10, 70]), {"diff": 50, "grace": 0}),
    *windowed(SL + "testEarlyRecordsRepeatedInput", "sliding",
              seq("A", [0, 2, 4, 0, 2, 2, 0, 7]), {"diff": 5, "grace": 0}),
    *windowed(SL + "testEarlyRecordsLargeInput", "sliding", _EARLY, {"diff": 10, "grace": 1},
              emits=("close",)),
    *windowed(SL + "testEarlyRecordsLargeInput", "sliding", _EARLY, {"diff": 10, "grace": 50},
              emits=("update",)),
    *windowed(SL + "testNoGracePeriodSmallInput", "sliding",
              seq("A", [100, 105, 106, 103, 113, 110]), {"diff": 50}),
    *windowed(SL + "testEarlyNoGracePeriodLargeInput", "sliding", _EARLY, {"diff": 10}),
    *windowed(SL + "testNoGracePeriodLargeInput", "sliding",
              seq("E", [100, 105, 106, 103, 113, 110, 104, 102, 115],
                  ["1", "3", "4", "2", "6", "5", "7", "8", "9"]), {"diff": 10}),
    *windowed(SL + "shouldLogAndMeterWhenSkippingExpiredWindowByGrace", "sliding",
              seq("k", [200, 100, 101, 102, 103, 104, 105, 15, 300, 400],
                  ["100", "0", "1", "2", "3", "4", "5", "6", "101", "102"]),
              {"diff": 10, "grace": 90}),
    *windowed(SL + "testAggregateRandomInput(in order)", "sliding",
              _shuffled(list(range(21))), {"diff": 10, "grace": 100}, ops=("concat",)),
    *windowed(SL + "testAggregateRandomInput(reversed)", "sliding",
              _shuffled(list(range(20, -1, -1))), {"diff": 10, "grace": 100}, ops=("concat",)),
    *windowed(SL + "testAggregateRandomInput(interleaved)", "sliding",
              _shuffled([(7 * i) % 21 for i in range(21)]), {"diff": 10, "grace": 100},
              ops=("concat",)),
]

# -- SuppressScenarioTest ---------------------------------------------------------------------
SU = "SuppressScenarioTest."
SUPPRESS_CASES = [
    *windowed(SU + "shouldSupportFinalResultsForTimeWindows", "time_window",
              seq("k1", [0, 1, 2, 1, 0, 5, 0], ["v1"] * 7),
              {"size": 2, "grace": 1, "suppress": FINAL}, cachings=(False,)),
    *windowed(SU + "shouldSupportFinalResultsForTimeWindowsWithLargeJump", "time_window",
              seq("k1", [0, 1, 2, 0, 3, 0, 4, 0, 30], ["v1"] * 9),
              {"size": 2, "grace": 2, "suppress": FINAL}, cachings=(False,)),
    *windowed(SU + "shouldSupportFinalResultsForSlidingWindows", "sliding",
              seq("k1", [10, 11, 10, 13, 10, 24, 5, 7, 90], ["v1"] * 9),
              {"diff": 5, "grace": 15, "suppress": FINAL}, cachings=(False,)),
    *windowed(SU + "shouldSupportFinalResultsForSessionWindows", "session",
              [r("k1", "v1", 0), r("k1", "v1", 5), r("k1", "v1", 1), r("k2", "v1", 11),
               r("k1", "v1", 5), r("k1", "v1", 30)], {"gap": 5, "suppress": FINAL},
              cachings=(False,)),
]
# the tests count a table grouped by its values and suppress the count; the table shape has no
# suppress, so the stream shape counts the values' groups (a row's change of group, which
# subtracts from the old group, is not expressed)
_SUPPRESSED = [r("v1", 1, 0), r("v2", 1, 1), r("v1", 1, 2), r("x", 1, 3)]
for method, limit, max_records, last in [
    ("shouldImmediatelyEmitEventsWithZeroEmitAfter", 0, None, r("y", 1, 4)),
    ("shouldSuppressIntermediateEventsWithTimeLimit", 2, None, r("tock", 1, 4)),
    ("shouldSuppressIntermediateEventsWithRecordLimit", 2**63 - 1, 1, r("x", 1, 4)),
]:
    SUPPRESS_CASES += variants(SU + method, "stream_aggregate", [*_SUPPRESSED, last],
                               {"suppress": {"type": "time_limit", "limit": limit,
                                             "max_records": max_records}},
                               op=["count", "sum"], caching=[False, True])

# -- KTableAggregateTest: table("in").groupBy(by value mod groups).<op> ------------------------
TA = "KTableAggregateTest."
_TABLE_INPUTS = {
    "testAggBasic": [r("A", 1, 10), r("B", 2, 15), r("A", 3, 20), r("B", 4, 18), r("C", 5, 5),
                     r("D", 6, 25), r("B", 7, 15), r("C", 8, 10)],
    "testAggRepartition": [r("A", 1, 10), r("A", None, 15), r("A", 1, 12), r("B", 2, 20),
                           r("null", 3, 25), r("B", 4, 23), r("NULL", 5, 24), r("B", 7, 22)],
    # green, blue and yellow as 0, 1 and 2: three groups stand for the selected values
    "testCount": [r("A", 0, 10), r("B", 0, 9), r("A", 1, 12), r("C", 2, 15), r("D", 0, 11)],
    "testRemoveOldBeforeAddNew": [r("11", 1, 10), r("12", 2, 8), r("11", None, 12),
                                  r("12", 3, 6)],
    # the result's timestamp is the latest of the rows it adds and subtracts
    "KGroupedTableImplTest.assertReduced": [r("A", 1, 10), r("B", 2, 11), r("A", 2, 30),
                                            r("B", 1, 30), r("A", 5, 50), r("B", 6, 20)],
    "KGroupedTableImplTest.processData": [r("A", 1, 10), r("B", 1, 50), r("C", 1, 30),
                                          r("D", 2, 40), r("E", 2, 60)],
    "KTableReduceTest.shouldAddAndSubtract": [r("A", 1, 10), r("A", 2, 15), r("A", None, 12)],
    "testShouldNotSendTransientStateIfNotUpgrading": [r("1", 0, 8),
                                                       r("1", 0, 9)],
}
TABLE_AGGREGATE_CASES = [
    c for method, inputs in _TABLE_INPUTS.items()
    for c in variants(method if "." in method else TA + method, "table_aggregate", inputs,
                      {"store_type": "in_memory"}, op=["sum", "count", "reduce_sum"],
                      caching=[False, True], groups=[1, 3])
]

# -- KTableFilterTest, KTableMapValuesTest: table_ops ----------------------------------------
TF = "KTableFilterTest."
_FILTER_INPUTS = {
    TF + "setUp": [r("A", 1, 10), r("B", 2, 5), r("C", 3, 8), r("D", 4, 14), r("A", None, 18),
                   r("B", None, 15)],
    TF + "shouldGetValuesOnMaterialization": [r("A", 1, 5), r("B", 1, 10), r("C", 1, 15),
                                              r("A", 2, 15), r("B", 2, 8), r("A", 3, 20),
                                              r("A", None, 10), r("B", None, 20)],
    TF + "shouldPassThroughOnMaterialization": [r("A", 1, 5), r("B", 1, 10), r("C", 1, 15),
                                                r("A", 2, 10), r("B", 2, 5), r("A", 3, 15),
                                                r("A", None, 10), r("B", None, 20)],
    "KTableMapValuesTest.testKTable": [r("A", 1, 5), r("B", 2, 25), r("C", 3, 20),
                                       r("D", 4, 10)],
    "KTableSourceTest.testKTable": [r("A", 1, 10), r("B", 2, 11), r("C", 3, 12), r("D", 4, 13),
                                    r("A", None, 14), r("B", None, 15)],
    # the same value again: skipped as idempotent when newer, kept when out of order
    "KTableSourceTest.testKTableSourceEmitOnChange": [r("A", 1, 10), r("B", 2, 11),
                                                      r("A", 1, 12), r("B", 3, 13),
                                                      r("A", 1, 9)],
    "KTableSourceTest.testNotSendingOldValue": [r("A", 1, 10), r("B", 1, 20), r("C", 1, 15),
                                                r("A", 2, 8), r("B", 2, 22), r("A", 3, 12),
                                                r("A", None, 15), r("B", None, 20)],
    "KTableMapValuesTest.testQueryableKTable": [r("A", 1, 50), r("B", 1, 10), r("C", 1, 30),
                                                r("A", 2, 25), r("B", 2, 20), r("A", 3, 35),
                                                r("A", None, 1)],
}
TABLE_OPS_CASES = [
    c for source, inputs in _FILTER_INPUTS.items()
    for c in variants(source, "table_ops", inputs,
                      {"source_named": True, "store_type": "in_memory"},
                      operation=(["filter", "filter_not"] if "Filter" in source
                                 else ["map_values"]),
                      source=["table", "to_table"], op_materialized=[False, True],
                      caching=[False, True])
]

#: every ported case outside the joins
CASES = (SESSION_CASES + GROUPED_CASES + TIME_WINDOW_CASES + SLIDING_CASES + SUPPRESS_CASES
         + TABLE_AGGREGATE_CASES + TABLE_OPS_CASES)
