"""Kafka Streams as the referee: kspark's test driver against Kafka Streams 4.3.1's own
``TopologyTestDriver`` (the oracle in ``oracle/``), record for record and store for store.

Per shape, hypothesis draws cases (keys from a small alphabet so they collide, values,
timestamps out of order, late, equal and with large jumps, and the shape's window parameters);
both sides must produce the same output records in the same order and the same store contents.
``KSPARK_ORACLE_EXAMPLES`` sets the number of cases per shape (default 200); the runs are
derandomized, so CI is reproducible. The configuration mapping and every normalisation are
documented in ``comparison.py``; the tests at the end pin each of them by showing both
behaviours.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from comparison import LONG_RETENTION, difference, live_entries, to_oracle
from hypothesis import HealthCheck, given, settings
from kspark_side import CaseError
from kspark_side import run as run_kspark
from oracle_cases import STRATEGIES

from oracle import OracleCaseError, run_single

EXAMPLES = int(os.environ.get("KSPARK_ORACLE_EXAMPLES", "200"))

differential = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(kafka_streams, case: dict) -> None:
    report = difference(case, kafka_streams.run(to_oracle(case)), run_kspark(case))
    assert report is None, report


@pytest.mark.parametrize("shape", sorted(STRATEGIES))
def test_kspark_matches_kafka_streams(kafka_streams, shape: str) -> None:
    @differential
    @given(STRATEGIES[shape])
    def run(case: dict) -> None:
        # the topology's description too, character for character (names, layout)
        check(kafka_streams, {**case, "describe": True})

    run()


# -- the oracle itself --------------------------------------------------------------------------
def records(lines: list[dict]) -> list[tuple]:
    return [(r["key"], tuple(r["window"] or ()), r["value"], r["ts"]) for r in lines
            if r["kind"] == "record"]


def stores(lines: list[dict]) -> list[tuple]:
    return [(r["store"], r["key"], tuple(r["window"] or ()), r["value"], r["ts"]) for r in lines
            if r["kind"] == "store"]


def test_single_mode_prints_json_lines(oracle_jar) -> None:
    case = {"shape": "session", "params": {"op": "count", "gap": 10},
            "inputs": [{"key": "a", "value": 1, "ts": 1000}, {"key": "a", "value": 1, "ts": 1005}]}
    code, lines, _ = run_single(case, oracle_jar)
    assert code == 0
    assert lines == [
        {"kind": "record", "key": "a", "window": [1000, 1000], "value": 1, "ts": 1000,
         "tombstone": False},
        {"kind": "record", "key": "a", "window": [1000, 1000], "value": None, "ts": 1000,
         "tombstone": True},
        {"kind": "record", "key": "a", "window": [1000, 1005], "value": 2, "ts": 1005,
         "tombstone": False},
        {"kind": "store", "store": "store", "key": "a", "window": [1000, 1005], "value": 2,
         "ts": None},
    ]
    assert run_kspark(case) == lines


@pytest.mark.parametrize(("case", "message"), [
    ({"shape": "hopping_sessions", "params": {}}, "unknown shape 'hopping_sessions'"),
    ({"shape": "session", "params": {"op": "count", "gap": 5, "jitter": 3}},
     "unknown parameter 'jitter' for shape 'session'"),
    ({"shape": "time_window", "params": {"op": "median", "size": 5}}, 'unknown op "median"'),
    ({"shape": "session", "params": {"op": "count"}}, "needs parameter 'gap'"),
    ({"shape": "session", "params": {"op": "count", "gap": 5, "suppress": {"type": "later"}}},
     'unknown suppress type "later"'),
    ({"shape": "stream_aggregate", "params": {"op": "sum", "suppress": {"type": "window_close"}}},
     "needs a windowed shape"),
])
def test_the_oracle_refuses_what_it_cannot_express(kafka_streams, case, message) -> None:
    with pytest.raises(OracleCaseError, match=message):
        kafka_streams.run(case)


def test_single_mode_exits_with_an_error_naming_the_problem(oracle_jar) -> None:
    code, lines, stderr = run_single({"shape": "hopping_sessions"}, oracle_jar)
    assert code == 2 and lines == [] and "unknown shape 'hopping_sessions'" in stderr
    case = {"shape": "session", "params": {"op": "count", "gap": 5, "jitter": 3}}
    code, lines, stderr = run_single(case, oracle_jar)
    assert code == 2 and lines == []
    assert "unknown parameter 'jitter' for shape 'session'" in stderr


def test_a_refused_case_does_not_stop_the_batch(kafka_streams) -> None:
    good = {"shape": "stream_aggregate", "params": {"op": "count"},
            "inputs": [{"key": "k", "value": 1, "ts": 1}]}
    first, refused, last = kafka_streams.run_many([good, {"shape": "nope"}, good])
    assert first == last and records(first) == [("k", (), 1, 1)]
    assert isinstance(refused, OracleCaseError) and "unknown shape 'nope'" in str(refused)


def test_kspark_side_refuses_unknown_shapes_and_parameters() -> None:
    with pytest.raises(CaseError, match="unknown shape"):
        run_kspark({"shape": "nope", "params": {}})
    with pytest.raises(CaseError, match="unknown parameter 'jitter'"):
        run_kspark({"shape": "session", "params": {"op": "count", "gap": 5, "jitter": 1}})


def test_both_drivers_flush_caches_after_every_record(kafka_streams) -> None:
    """Kafka Streams' TopologyTestDriver commits (and so flushes caches) after each record:
    with caching on, a record inside an existing session forwards one update of the session
    (its tombstone and re-put of the same window are combined in the cache), with caching off
    the tombstone and the update; kspark's driver does the same."""
    inputs = [{"key": "a", "value": 1, "ts": 10}, {"key": "a", "value": 2, "ts": 20},
              {"key": "a", "value": 3, "ts": 15}]
    for caching, expected in [
        (True, [("a", (10, 10), 1, 10), ("a", (10, 10), None, 10), ("a", (10, 20), 3, 20),
                ("a", (10, 20), 6, 20)]),
        (False, [("a", (10, 10), 1, 10), ("a", (10, 10), None, 10), ("a", (10, 20), 3, 20),
                 ("a", (10, 20), None, 20), ("a", (10, 20), 6, 20)]),
    ]:
        case = {"shape": "session", "params": {"op": "sum", "gap": 10, "caching": caching,
                                               "retention": LONG_RETENTION},
                "inputs": inputs}
        assert records(kafka_streams.run(to_oracle(case))) == expected
        assert records(run_kspark(case)) == expected


# -- deviations and normalisations, each pinned with both behaviours ----------------------------
def test_deviation_session_retention_one_ms_more(kafka_streams) -> None:
    """README "Deviations", item 2: kspark's session store keeps gap + grace + 1 ms. At Kafka
    Streams' default (gap + grace) the session [0, 0] is gone when a@10 arrives (close time 0):
    Kafka Streams starts a new session, kspark merges. The comparison gives the oracle kspark's
    retention (``to_oracle``), and then both merge."""
    case = {"shape": "session", "params": {"op": "count", "gap": 10, "caching": False},
            "inputs": [{"key": "a", "value": 1, "ts": 0}, {"key": "b", "value": 1, "ts": 10},
                       {"key": "a", "value": 1, "ts": 10}]}
    kafka_default = kafka_streams.run(case)
    kspark = run_kspark(case)
    assert records(kafka_default)[2:] == [("a", (10, 10), 1, 10)]
    assert records(kspark)[2:] == [("a", (0, 0), None, 0), ("a", (0, 10), 2, 10)]
    assert to_oracle(case)["params"]["retention"] == 11
    assert kafka_streams.run(to_oracle(case)) == kspark


def test_deviation_kafka_cache_serves_expired_sessions(kafka_streams) -> None:
    """With caching on, Kafka Streams' caching session store still returns sessions its store
    has expired (the 10 MB cache keeps them): c@173 merges with c[168, 168] although
    168 <= 186 - (gap + grace + 1). kspark never reads expired data (docs/semantics.md §6),
    as Kafka Streams itself without the cache. The random cases with caching on therefore use a
    retention that expires nothing (``oracle_cases``)."""
    inputs = [{"key": "c", "value": 2, "ts": 168}, {"key": "a", "value": 4, "ts": 186},
              {"key": "c", "value": 8, "ts": 173}]
    cached = {"shape": "session", "params": {"op": "sum", "gap": 10, "grace": 5},
              "inputs": inputs}
    uncached = {**cached, "params": {**cached["params"], "caching": False}}
    c173 = [r for r in records(kafka_streams.run(to_oracle(cached))) if r[3] == 173]
    assert c173 == [("c", (168, 173), 10, 173)]  # Kafka Streams, caching on: merged
    expected = [("c", (173, 173), 8, 173)]  # the session [168, 168] has expired
    assert [r for r in records(run_kspark(cached)) if r[3] == 173] == expected
    assert [r for r in records(kafka_streams.run(to_oracle(uncached))) if r[3] == 173] == expected
    assert difference(uncached, kafka_streams.run(to_oracle(uncached)), run_kspark(uncached)) \
        is None
    long = {**cached, "params": {**cached["params"], "retention": LONG_RETENTION}}
    assert difference(long, kafka_streams.run(to_oracle(long)), run_kspark(long)) is None


def test_deviation_kafka_cache_serves_expired_cogroup_windows(kafka_streams) -> None:
    """A cogroup keeps one store for its inputs, whose stream time is the newest of them all,
    while each input's processor closes windows by its own records. b's a@684 moves the store
    to 684; a's b@668 finds [660, 670) open (a's time is 668, grace 0) but expired in the store
    (660 <= 684 - 19). Without a cache both engines forward the update and the store drops the
    write. With caching on, Kafka Streams' cache takes the write, forwards it at the commit and
    would serve it to the window's next record; kspark's store drops it before the cache, as it
    drops every expired write (README, "Expired data stays expired"). The random cogroup cases
    with caching on use a retention that expires nothing (``oracle_cases``)."""
    params = {"rekey_b": False, "named": False, "caching": True, "store_type": "rocksdb",
              "windows": "time", "grace": 0, "retention": 19}
    cached = {"shape": "cogroup", "params": params,
              "inputs": [{"topic": "b", "key": "a", "value": 20, "ts": 684},
                         {"topic": "a", "key": "b", "value": 1, "ts": 668}]}
    a684, b668 = ("a", (680, 690), -20, 684), ("b", (660, 670), 1, 668)
    assert records(kafka_streams.run(to_oracle(cached))) == [a684, b668]
    assert records(run_kspark(cached)) == [a684]
    uncached = {**cached, "params": {**params, "caching": False}}
    assert records(kafka_streams.run(to_oracle(uncached))) == records(run_kspark(uncached)) \
        == [a684, b668]
    long = {**cached, "params": {**params, "retention": LONG_RETENTION}}
    assert difference(long, kafka_streams.run(to_oracle(long)), run_kspark(long)) is None


def test_kafka_loses_final_results_of_expired_windows(kafka_streams) -> None:
    """on_window_close of time windows without caching: the record at 100 closes [0, 10) and,
    writing its own window first, expires it in Kafka Streams' (time-ordered RocksDB) store
    before the final-result query, so Kafka Streams never forwards it; kspark does
    (docs/semantics.md §3: each window once). (With caching, Kafka Streams' cache still holds the
    window and it is forwarded.) With a long retention both forward it; the random
    on_window_close cases of time and sliding windows use one (``oracle_cases``)."""
    case = {"shape": "time_window",
            "params": {"op": "count", "size": 10, "emit": "close", "caching": False,
                       "store_type": "rocksdb"},
            "inputs": [{"key": "a", "value": 1, "ts": 5}, {"key": "a", "value": 1, "ts": 100}]}
    assert records(kafka_streams.run(case)) == []
    assert records(run_kspark(case)) == [("a", (0, 10), 1, 5)]
    long = {**case, "params": {**case["params"], "retention": LONG_RETENTION}}
    assert records(kafka_streams.run(long)) == records(run_kspark(long)) == [("a", (0, 10), 1, 5)]


def test_kafka_in_memory_store_loses_final_session_results(kafka_streams) -> None:
    """on_window_close of sessions: Kafka Streams' in-memory session store drops sessions with
    ``end <= observed - retention`` before the final-result query, so c[42, 42] is lost when
    c@1214 closes it; its default RocksDB store keeps it, as kspark does. The random
    on_window_close cases run the oracle on RocksDB (``oracle_cases``)."""
    case = {"shape": "session",
            "params": {"op": "count", "gap": 4, "grace": 6, "emit": "close", "caching": False},
            "inputs": [{"key": "c", "value": 0, "ts": 42}, {"key": "c", "value": 0, "ts": 1214}]}
    expected = [("c", (42, 42), 1, 42)]
    in_memory = {**case, "params": {**case["params"], "store_type": "in_memory"}}
    assert records(kafka_streams.run(to_oracle(in_memory))) == []
    assert records(kafka_streams.run(to_oracle(case))) == expected  # RocksDB, the default
    assert records(run_kspark(case)) == expected


def test_join_stores_follow_kafka_streams_rocksdb_stores(kafka_streams) -> None:
    """A stream-stream join's window stores retain duplicates. Kafka Streams' in-memory window
    store moves its observed stream time on a put of a null value (which it does not store),
    so a:x@0 after a:null@1 falls outside its retention of 1 ms and is not stored: the self
    join loses x+x. Its default RocksDB store skips such a put altogether, as kspark's stores
    do; the random stream-join cases run the oracle on RocksDB (``oracle_cases``)."""
    case = {"shape": "stream_join",
            "params": {"kind": "inner", "diff": 0, "before": 0, "after": 1, "self": True},
            "inputs": [{"topic": "left", "key": "a", "value": None, "ts": 1},
                       {"topic": "left", "key": "a", "value": "x", "ts": 0}]}
    expected = [("a", (), "x+x", 0)]
    in_memory = {**case, "params": {**case["params"], "store_type": "in_memory"}}
    assert records(kafka_streams.run(in_memory)) == []
    assert records(kafka_streams.run(case)) == expected  # RocksDB, the default
    assert records(run_kspark(case)) == expected


def test_outer_join_emits_after_every_record_at_emit_interval_zero(kafka_streams) -> None:
    """README "Deviations": with Kafka Streams' default emit interval (1 s of wall-clock time)
    its left join looks for closed windows once (the test driver's clock stands still); the
    oracle sets the interval to 0, and then it emits as kspark does."""
    case = {"shape": "stream_join", "params": {"kind": "left", "diff": 5},
            "inputs": [{"topic": "left", "key": "a", "value": "x", "ts": 0},
                       {"topic": "left", "key": "b", "value": "y", "ts": 1},
                       {"topic": "left", "key": "c", "value": "z", "ts": 20},
                       {"topic": "left", "key": "d", "value": "w", "ts": 40}]}
    expected = [("a", (), "x+null", 0), ("b", (), "y+null", 1), ("c", (), "z+null", 20)]
    assert records(kafka_streams.run(case)) == expected
    assert records(run_kspark(case)) == expected
    throttled = {**case, "params": {**case["params"], "emit_interval": 1000}}
    assert records(kafka_streams.run(throttled)) == []


def test_kafka_streams_fails_on_a_null_key_in_a_grace_buffer(kafka_streams) -> None:
    """A left stream-table join with a grace period joins a record without a key (Kafka
    Streams' KIP-962), but Kafka Streams 4.3.1 puts it into its grace buffer first, which
    refuses a null key: the application stops. kspark joins such a record at once, as the
    join would without a buffer (README "Deviations"); the random cases leave null keys out
    of left joins with a grace period."""
    case = {"shape": "stream_table_join", "params": {"kind": "left", "versioned": 10,
                                                     "grace": 5},
            "inputs": [{"topic": "right", "key": "a", "value": "t", "ts": 0},
                       {"topic": "left", "key": None, "value": "x", "ts": 1}]}
    with pytest.raises(OracleCaseError, match="NullPointerException: key cannot be null"):
        kafka_streams.run(case)
    assert records(run_kspark(case)) == [(None, (), "x+null", 1)]


def test_a_tombstone_at_the_latest_time_of_a_versioned_table_leaves_no_trace(kafka_streams
                                                                          ) -> None:
    """Found by ``benchmarks/differential_fuzz.py`` (1 case in 10,000): a versioned table's
    tombstone at its latest value's own timestamp deletes that value without a trace in Kafka
    Streams' store, so an older value put afterwards becomes the latest (z, not a deletion);
    kspark's store does the same. With an earlier value the tombstone holds."""
    rows = [("a", "xy", 511), ("a", None, 511), ("a", "z", 491)]
    case = {"shape": "stream_table_join",
            "params": {"kind": "left", "versioned": 50, "table_caching": False},
            "inputs": [{"topic": "right", "key": k, "value": v, "ts": t} for k, v, t in rows]
            + [{"topic": "left", "key": "a", "value": "l", "ts": 600}]}
    kafka = kafka_streams.run(case)
    assert [r[2] for r in records(kafka)] == ["l+z"]
    assert difference(case, kafka, run_kspark(case)) is None
    earlier = {**case, "inputs": [{"topic": "right", "key": "a", "value": "w", "ts": 480},
                                  *case["inputs"]]}
    kafka = kafka_streams.run(earlier)
    assert [r[2] for r in records(kafka)] == ["l+null"]
    assert difference(earlier, kafka, run_kspark(earlier)) is None


def test_store_dumps_compare_live_entries_only(kafka_streams) -> None:
    """Kafka Streams' time-ordered window store (used for on_window_close) returns windows its
    retention has expired from ``all()``; kspark never returns expired data (docs/semantics.md §6).
    ``live_entries`` drops them from the oracle's dump, using the store's observed stream time
    taken from the oracle's own entries."""
    case = {"shape": "time_window",
            "params": {"op": "count", "size": 10, "grace": 5, "emit": "close"},
            "inputs": [{"key": "a", "value": 1, "ts": 3}, {"key": "b", "value": 1, "ts": 500}]}
    kafka = kafka_streams.run(case)
    assert stores(kafka) == [("store", "a", (0, 10), 1, 3), ("store", "b", (500, 510), 1, 500)]
    assert stores(live_entries(case, kafka)) == [("store", "b", (500, 510), 1, 500)]
    assert stores(run_kspark(case)) == stores(live_entries(case, kafka))


def test_suppress_releases_ties_in_key_byte_order(kafka_streams) -> None:
    """Fixed in kspark: Kafka Streams' suppression buffer orders keys buffered at the same time
    by their serialized bytes (``BufferKey(time, key)``); kspark released them by arrival."""
    case = {"shape": "time_window",
            "params": {"op": "count", "size": 10, "suppress": {"type": "window_close"}},
            "inputs": [{"key": k, "value": 1, "ts": t} for t, k in enumerate("bacB", 1)]
            + [{"key": "z", "value": 1, "ts": 30}]}
    expected = [(k, (0, 10), 1, t) for k, t in [("B", 4), ("a", 2), ("b", 1), ("c", 3)]]
    assert records(kafka_streams.run(case)) == records(run_kspark(case)) == expected


def test_suppress_time_limit_forwards_a_delete_of_a_new_key(kafka_streams) -> None:
    """Fixed in kspark: a session created and merged away while buffered by
    ``until_time_limit`` is released as a tombstone (``Change(None, None)``), as Kafka Streams
    does (only final results drop tombstones); kspark dropped it."""
    case = {"shape": "session",
            "params": {"op": "sum", "gap": 35, "caching": False,
                       "suppress": {"type": "time_limit", "limit": 25}},
            "inputs": [{"key": "a", "value": 1, "ts": 989}, {"key": "a", "value": 2, "ts": 966},
                       {"key": "b", "value": 1, "ts": 2000}]}
    expected = [("a", (966, 989), 3, 989), ("a", (989, 989), None, 989)]
    assert records(kafka_streams.run(to_oracle(case))) == records(run_kspark(case)) == expected


def test_sliding_windows_update_newest_first(kafka_streams) -> None:
    """Fixed in kspark: with its built-in stores Kafka Streams aggregates sliding windows with
    ``processReverse`` (existing windows newest first); kspark followed ``processInOrder``,
    which forwards the same updates in another order."""
    case = {"shape": "sliding", "params": {"op": "concat", "diff": 10, "grace": 100,
                                           "caching": False},
            "inputs": [{"key": "A", "value": v, "ts": t}
                       for v, t in [("a", 10), ("b", 15), ("c", 30), ("d", 12)]]}
    expected_tail = [("A", (11, 21), "bd", 15), ("A", (5, 15), "abd", 15),
                     ("A", (2, 12), "ad", 12), ("A", (13, 23), "b", 15)]
    assert records(kafka_streams.run(to_oracle(case)))[4:] == expected_tail
    assert records(run_kspark(case))[4:] == expected_tail


@pytest.mark.parametrize("shape", ["session", "time_window"])
def test_null_value_in_windowed_count(kafka_streams, shape: str) -> None:
    params = {"op": "count", "gap": 10} if shape == "session" else {"op": "count", "size": 10}
    case = {"shape": shape, "params": params,
            "inputs": [{"key": "a", "value": None, "ts": 1}, {"key": "a", "value": 5, "ts": 2}]}
    check(kafka_streams, case)


def test_sliding_windows_drop_null_values_on_both_sides(kafka_streams) -> None:
    case = {"shape": "sliding", "params": {"op": "count", "diff": 10},
            "inputs": [{"key": "a", "value": None, "ts": 1}, {"key": "a", "value": 5, "ts": 2}]}
    check(kafka_streams, case)


def test_a_failing_user_function_stops_both_at_the_same_record(kafka_streams) -> None:
    """An aggregator that throws stops both engines at that record (Kafka Streams: a
    ``StreamsException`` from ``pipeInput``, kspark: a ``StreamsError`` naming the processor,
    topic, partition, offset and key); the records before it are the same."""
    case = {"shape": "stream_aggregate", "params": {"op": "sum", "raise_on": 3, "caching": False},
            "inputs": [{"key": "a", "value": 1, "ts": 1}, {"key": "b", "value": 2, "ts": 2},
                       {"key": "b", "value": 3, "ts": 3}, {"key": "a", "value": 4, "ts": 4}]}
    expected = [{"kind": "record", "key": "a", "window": None, "value": 1, "ts": 1,
                 "tombstone": False},
                {"kind": "record", "key": "b", "window": None, "value": 2, "ts": 2,
                 "tombstone": False},
                {"kind": "error", "input": 2, "error": "user_function"}]
    assert kafka_streams.run(case) == run_kspark(case) == expected


def _inputs(*values: int | None, start: int = 0) -> list[dict]:
    return [{"key": "a", "value": v, "ts": start + 5 * i} for i, v in enumerate(values)]


@pytest.mark.parametrize(("case", "last"), [
    # the merger returns null on the stored session [0, 0] (= 1): the aggregator gets null
    ({"shape": "session", "params": {"op": "sum", "gap": 10, "merger_none_on": 1},
      "inputs": _inputs(1, 2)}, ("a", 2)),
    # ... and fails on it: Kafka Streams merges before it drops a record of a closed session
    ({"shape": "session", "params": {"op": "sum", "gap": 10, "merger_raise_on": 1,
                                     "caching": False, "retention": LONG_RETENTION},
      "inputs": [*_inputs(1, start=20), {"key": "b", "value": 1, "ts": 100},
                 {"key": "a", "value": 5, "ts": 15}]}, 2),
    # the subtractor returns null on the removed 4: the adder starts from the initializer
    ({"shape": "table_aggregate", "params": {"op": "reduce_sum", "groups": 1,
                                            "subtractor_none_on": 4}, "inputs": _inputs(4, 3)},
     ("g0", 3)),
    ({"shape": "table_aggregate", "params": {"op": "sum", "subtractor_raise_on": 4},
      "inputs": _inputs(4, 3)}, 1),
    # the second branch's predicate fails on 3; the first one takes 4 before it is asked
    ({"shape": "branch", "params": {"branches": [{"pred": {"mod": 2, "rem": 0}},
                                                 {"pred": {"key": "a", "raise_on": 3}}]},
      "inputs": _inputs(1, 4, 3)}, 2),
    # Doubling fails on 3 after forwarding 6: what the count made of it before is kept
    ({"shape": "process_values", "params": {"caching": False, "raise_on": 3},
      "inputs": _inputs(1, 3)}, 1),
    ({"shape": "punctuator", "params": {"stream_interval": 5, "stream_raise_at": 2},
      "inputs": _inputs(1, 4, 3)}, 1),
    # a wall-clock punctuator fails within advanceWallClockTime
    ({"shape": "punctuator", "params": {"wall_interval": 5, "wall_raise_at": 2},
      "inputs": [*_inputs(1), {"advance_wall_clock": 6}, {"advance_wall_clock": 6}]}, 2),
    # the key selector: a null key (dropped by the count), a Long key, a failure
    ({"shape": "repartition", "params": {"rekey": True, "caching": False, "none_on": 1},
      "inputs": _inputs(1, 2)}, ("a0", 1)),
    ({"shape": "repartition", "params": {"rekey": True, "int_key_on": 2},
      "inputs": _inputs(1, 2)}, 1),
    ({"shape": "repartition", "params": {"rekey": True, "raise_on": 2},
      "inputs": _inputs(1, 2)}, 1),
])
def test_each_user_function_misbehaves_alike(kafka_streams, case: dict, last: Any) -> None:
    """The user functions the generators make return null or fail (tests/oracle/README.md):
    ``last`` is the input a case stops at, or its last output record (key, value)."""
    kafka = kafka_streams.run(to_oracle(case))
    if isinstance(last, int):
        assert kafka[-1]["kind"] == "error" and kafka[-1]["input"] == last
    else:
        assert records(kafka)[-1][::2] == last
    assert run_kspark(case) == kafka


@pytest.mark.parametrize("caching", [False, True])
def test_a_key_of_the_wrong_type_fails_at_the_serializer(kafka_streams, caching: bool) -> None:
    """The table shape's mapper groups the row a:7 under the int 7 where the repartition
    topic's key serde is a String one: Kafka Streams' ``RecordCollectorImpl#send`` turns the
    serializer's ``ClassCastException`` into a ``StreamsException``; kspark raises a
    ``StreamsError`` naming the sink, the key and the record (with caching on, the source
    table's cache is flushed at the commit after the record: fixed in kspark, whose error did
    not name the record then)."""
    case = {"shape": "table_aggregate",
            "params": {"op": "sum", "int_key_on": 7, "caching": caching,
                       "source_caching": caching},
            "inputs": [{"key": "a", "value": 1, "ts": 1}, {"key": "a", "value": 7, "ts": 2}]}
    kafka = kafka_streams.run(case)
    assert kafka[-1] == {"kind": "error", "input": 1, "error": "serialization"}
    assert run_kspark(case) == kafka


@pytest.mark.parametrize("shape", ["session", "time_window", "stream_aggregate"])
def test_an_aggregator_returning_none_deletes_the_aggregate(kafka_streams, shape: str) -> None:
    """An aggregator returning null (a:3) puts null: the aggregate is deleted and a tombstone
    forwarded; the next record starts from the initializer."""
    params = {"session": {"gap": 10}, "time_window": {"size": 10}, "stream_aggregate": {}}
    case = {"shape": shape, "params": {"op": "sum", "none_on": 3, "caching": False,
                                       **params[shape]},
            "inputs": [{"key": "a", "value": v, "ts": t} for v, t in [(1, 1), (3, 2), (4, 3)]]}
    kafka = kafka_streams.run(to_oracle(case))
    assert [r[2] for r in records(kafka)][-2:] == [None, 4]
    assert stores(kafka)[0][3] == 4
    check(kafka_streams, case)


@pytest.mark.parametrize(("shape", "params"), [
    ("session", {"op": "count", "gap": 10}),
    ("time_window", {"op": "count", "size": 10}),
    ("sliding", {"op": "count", "diff": 10}),
    ("table_aggregate", {"op": "reduce_sum"}),
])
def test_generated_store_names_follow_kafka_streams(kafka_streams, shape: str, params: dict
                                                    ) -> None:
    """Fixed in kspark: a session or time-window ``count(Materialized)`` without a store name
    takes one more index than ``count()`` (``SessionWindowedKStreamImpl#count`` /
    ``TimeWindowedKStreamImpl#count``: "we used to burn a topology name here"; sliding windows'
    does not), and a table's ``reduce`` names its store ``KTABLE-AGGREGATE-STATE-STORE-...``
    (``KGroupedTableImpl#reduce``), which also names the repartition topic."""
    case = {"shape": shape, "params": {**params, "store_named": False}, "describe": True,
            "inputs": [{"key": "a", "value": 1, "ts": 1}]}
    kafka = kafka_streams.run(to_oracle(case))
    assert kafka == run_kspark(case)
    store = stores(kafka)[-1][0]
    assert store == {"session": "KSTREAM-AGGREGATE-STATE-STORE-0000000002",
                     "time_window": "KSTREAM-AGGREGATE-STATE-STORE-0000000002",
                     "sliding": "KSTREAM-AGGREGATE-STATE-STORE-0000000001",
                     "table_aggregate": "KTABLE-AGGREGATE-STATE-STORE-0000000003"}[shape]
