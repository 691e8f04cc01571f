"""Cases ported from Kafka Streams 4.3.1's tests of the suppression processor, cogrouped
aggregations, ``split``, ``repartition`` and punctuation (see ``ported_cases.py``). The cogroup
shape's aggregators are on longs (``agg + v`` for topic ``a``, ``agg * 2 - v`` for ``b``), so
the tests' string values become longs (``"A"`` 1, ``"B"`` 2, ``"C"`` 3, ``"D"`` 4); the split
shape's predicates read values, so the tests' integer keys are also the values. The session
windows' grace of a day in SessionWindowedCogroupedKStreamImplTest is 1,000 s here (the shape's
stores keep 10,000 s).
"""

from __future__ import annotations

from typing import Any

from ported_cases import closing, r, variants, windowed

# -- KTableSuppressProcessorTest: the buffer's edges -----------------------------------------
SP = "KTableSuppressProcessorTest."
_NO_BUFFER = {"type": "time_limit", "limit": 0, "max_records": 0}
_ONE = [r("hey", 1, 0), r("hey", 2, 1), r("dummy", 1, 2)]
SUPPRESS_PROCESSOR_CASES = [
    *variants(SP + "zeroTimeLimitShouldImmediatelyEmit", "stream_aggregate", _ONE,
              {"suppress": {"type": "time_limit", "limit": 0, "max_records": None}},
              op=["count", "sum"], caching=[False, True]),
    *variants(SP + "intermediateSuppressionShouldBufferAndEmitLater", "stream_aggregate",
              [r("k", 1, 0), r("tick", 1, 1)],
              {"suppress": {"type": "time_limit", "limit": 1, "max_records": None}},
              op=["count"], caching=[False, True]),
    # a buffer of no record at all: every update (a session's tombstones too) passes at once
    *variants(SP + "suppressShouldNotDropTombstonesForKTable", "stream_aggregate", _ONE,
              {"suppress": _NO_BUFFER}, op=["count", "reduce_sum"], caching=[False, True]),
    *windowed(SP + "suppressShouldNotDropTombstonesForTimeWindows", "time_window",
              [{**i, "value": str(i["value"])} for i in _ONE],
              {"size": 100, "suppress": _NO_BUFFER}, emits=("update",)),
    *windowed(SP + "suppressShouldNotDropTombstonesForSessionWindows", "session",
              [r("hey", "1", 0), r("hey", "2", 5), r("dummy", "1", 7)],
              {"gap": 10, "suppress": _NO_BUFFER}, emits=("update",)),
    *variants(SP + "suppressShouldEmitWhenOverRecordCapacity", "stream_aggregate",
              [r("hey", 1, 100), r("dummyKey", 1, 101)],
              {"suppress": {"type": "time_limit", "limit": 100 * 86_400_000, "max_records": 1}},
              op=["count"], caching=[False, True]),
    # window [99, 100) of size 1 and grace 1 closes at 101
    *windowed(SP + "finalResultsSuppressionShouldBufferAndEmitAtGraceExpiration", "time_window",
              [r("hey", "1", 99), r("dummyKey1", "1", 100), r("dummyKey2", "1", 101)],
              {"size": 1, "grace": 1, "suppress": {"type": "window_close"}}, close=False),
    *windowed(SP + "finalResultsWithZeroGraceShouldStillBufferUntilTheWindowEnd", "time_window",
              [r("hey", "1", 5), r("dummyKey", "1", 100)],
              {"size": 100, "suppress": {"type": "window_close"}}, close=False),
    *windowed(SP + "finalResultsShouldDropTombstonesForSessionWindows", "session",
              [r("hey", "1", 0), r("hey", "2", 5), r("dummy", "1", 100)],
              {"gap": 10, "suppress": {"type": "window_close"}}, emits=("update",),
              close=False),
]

# -- Cogrouped aggregations -------------------------------------------------------------------
C = "CogroupedKStreamImplTest."
A, B = "a", "b"


def _cogroup(source: str, inputs: list[dict[str, Any]], windows: str = "none",
             **params: Any) -> list[dict[str, Any]]:
    cases = variants(source, "cogroup", inputs, {"windows": windows, **params,
                                                 "store_type": "in_memory"},
                     caching=[False, True], named=[False, True])
    return cases + [{**c, "inputs": [*c["inputs"], closing(c["inputs"], {"gap": params.get(
        "size", 10), "grace": params.get("grace", 0)})]} for c in cases if windows != "none"]


COGROUP_CASES = [
    *_cogroup(C + "shouldCogroupAndAggregateSingleKStreams",
              [r("k1", 1, 0, A), r("k2", 2, 0, A), r("k2", 2, 0, A), r("k1", 1, 0, A)]),
    *_cogroup(C + "testCogroupHandleNullValues",
              [r("k1", 1, 0, A), r("k2", 2, 0, A), r("k2", None, 0, A), r("k2", 2, 0, A),
               r("k1", 1, 0, A)]),
    *_cogroup(C + "shouldCogroupAndAggregateTwoKStreamsWithDistinctKeys",
              [r("k1", 1, t, A) for t in (0, 1, 10, 100)]
              + [r("k2", 2, t, B) for t in (100, 200, 1, 500, 500, 100)]),
    *_cogroup(C + "shouldCogroupAndAggregateTwoKStreamsWithSharedKeys",
              [r("k1", 1, 0, A), r("k2", 1, 1, A), r("k1", 1, 10, A), r("k2", 1, 100, A),
               r("k2", 2, 100, B), r("k2", 2, 200, B), r("k1", 2, 1, B), r("k2", 2, 500, B),
               r("k1", 2, 500, B), r("k2", 2, 500, B), r("k3", 2, 500, B), r("k2", 2, 100, B)],
              rekey_b=True),
    *_cogroup(C + "testCogroupKeyMixedAggregators",
              [r("k1", 1, 0, A), r("k2", 1, 1, A), r("k1", 1, 10, A), r("k2", 1, 100, A),
               r("k1", 2, 500, B), r("k2", 2, 500, B), r("k1", 2, 500, B), r("k2", 2, 100, B)]),
    *_cogroup("TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsTest",
              [r("k1", 1, 0, A), r("k2", 1, 0, A), r("k2", 1, 1, A), r("k1", 1, 2, A),
               r("k1", 2, 3, B), r("k2", 2, 3, B), r("k2", 2, 4, B), r("k1", 2, 4, B)],
              "time", size=500),
    *_cogroup("TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateManyWindowsTest",
              [r("k1", 1, 0, A), r("k2", 1, 499, A), r("k2", 1, 500, A), r("k1", 1, 500, A)],
              "time", size=500),
    *_cogroup("SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregateTest",
              [r("k1", 1, 0, A), r("k2", 1, 0, A), r("k1", 2, 599, A), r("k2", 2, 607, A)],
              "session", size=500),
    *_cogroup("SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregate2Test",
              [r("k1", 1, 0, A), r("k1", 1, 0, A), r("k2", 2, 599, A), r("k1", 2, 607, A)],
              "session", size=500),
    *_cogroup("SessionWindowedCogroupedKStreamImplTest.sessionWindowAggregateTest2StreamsTest",
              [r("k1", 1, t, A) for t in (0, 84, 113, 199)]
              + [r("k1", 2, 300, B), r("k2", 2, 301, B), r("k2", 2, 400, B),
                 r("k1", 2, 400, B)], "session", size=100, grace=1_000_000),
    *_cogroup("SessionWindowedCogroupedKStreamImplTest.sessionWindowMixAggregatorsTest",
              [r("k1", 1, 0, A), r("k2", 1, 0, A), r("k2", 1, 1, A), r("k1", 1, 2, A),
               r("k1", 2, 3, B), r("k2", 2, 3, B), r("k2", 2, 444, B), r("k1", 2, 444, B)],
              "session", size=100, grace=1_000_000),
    *_cogroup("SlidingWindowedCogroupedKStreamImplTest.slidingWindowAggregateStreamsTest",
              [r("k1", 1, 500, A), r("k2", 1, 500, A), r("k2", 1, 501, A), r("k1", 1, 502, A),
               r("k1", 2, 503, A), r("k2", 2, 503, A), r("k2", 2, 504, A), r("k1", 2, 504, A)],
              "sliding", size=500, grace=2000),
    *_cogroup("SlidingWindowedCogroupedKStreamImplTest."
              "slidingWindowAggregateOverlappingWindowsTest",
              [r("k1", 1, 500, A), r("k2", 1, 500, A), r("k1", 2, 750, A), r("k2", 2, 750, A),
               r("k2", 1, 1000, A), r("k1", 1, 1000, A)], "sliding", size=500, grace=2000),
]

# -- KStreamSplitTest: predicates on the (integer) keys, here the values ----------------------
SPLIT = "KStreamSplitTest."
_SPLIT_INPUTS = [r(str(k), k, 0) for k in (-1, 0, 1, 2, 3, 4, 5, 6, 7)]
_EVEN, _THREE, _FIVE, _SEVEN = ({"mod": m, "rem": 0} for m in (2, 3, 5, 7))
SPLIT_CASES = [
    {"source": SPLIT + "testKStreamSplit", "shape": "branch", "inputs": _SPLIT_INPUTS,
     "params": {"branches": [{"pred": p, "chain": "consume"} for p in (_EVEN, _THREE, _FIVE)]}},
    {"source": SPLIT + "testResultingMap", "shape": "branch", "inputs": _SPLIT_INPUTS,
     "params": {"prefix": "foo-", "default": {"chain": "none"}, "branches": [
         {"pred": _EVEN, "name": "bar"}, {"pred": _THREE, "chain": "consume"},
         {"pred": _FIVE, "chain": "drop"}, {"pred": {"key": "-1"}, "chain": "map"},
         {"pred": _SEVEN}]}},
    {"source": SPLIT + "testBranchingWithNoTerminalOperation", "shape": "branch",
     "inputs": _SPLIT_INPUTS,
     "params": {"branches": [{"pred": _EVEN, "chain": "consume"},
                             {"pred": _FIVE, "chain": "consume"}]}},
]

# -- KStreamRepartitionTest: a named repartition with a partition count -----------------------
REPARTITION_CASES = variants(
    "KStreamRepartitionTest.shouldInvokePartitionerWhenSet", "repartition",
    [r("0", 0, 10), r("1", 1, 11)], {"name": "test", "partitions": 2, "store_type": "in_memory"},
    rekey=[False, True], caching=[False, True])

# -- KGroupedStreamImplTest through a re-keying grouping (key + value parity), named or not ----
GROUPING_CASES = variants(
    "KGroupedStreamImplTest.shouldReduceAndMaterializeResults", "grouping",
    [r("1", 1, 5), r("2", 2, 1), r("1", 3, 3), r("1", 4, 10), r("3", 5, 8), r("3", 6, 9),
     r("3", None, 0), r(None, 7, 2)], {"store_type": "in_memory"},
    by=["group_by", "group_by_key"], grouped_name=[None, "by-parity"], caching=[False, True])

# -- PunctuationQueueTest (processor/internals): a 100 ms schedule, stream time and wall clock -
PQ = "PunctuationQueueTest."
_TIMES = [0, 99, 100, 199, 200, 1001, 1002, 1100]
_OFFSET = [50 + t for t in (0, 49, 50, 149, 150, 1051, 1052, 1150)]


def _wall(times: list[int]) -> list[dict[str, Any]]:
    """The wall clock moved to each of ``times`` (from 0), a record after each move."""
    out: list[dict[str, Any]] = []
    now = 0
    for t in times:
        out += [{"advance_wall_clock": t - now}, r("k", 1, t)]
        now = t
    return out


PUNCTUATOR_CASES = [
    *variants(PQ + "testPunctuationInterval", "punctuator", [r("k", 1, t) for t in _TIMES],
              {"store_type": "in_memory"}, stream_interval=[100], stream_cancel_after=[None, 1]),
    *variants(PQ + "testPunctuationIntervalCustomAlignment", "punctuator",
              [r("k", 1, t) for t in _OFFSET], {"store_type": "in_memory"},
              stream_interval=[100]),
    *variants(PQ + "testPunctuationIntervalCancelFromPunctuator", "punctuator", _wall(_TIMES),
              {"store_type": "in_memory"}, wall_interval=[100], wall_cancel_after=[None, 1]),
]

#: every ported case of this module
DSL_CASES = (SUPPRESS_PROCESSOR_CASES + COGROUP_CASES + SPLIT_CASES + REPARTITION_CASES
             + GROUPING_CASES + PUNCTUATOR_CASES)
