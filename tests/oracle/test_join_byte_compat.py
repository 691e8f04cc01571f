"""Join applications restarted from each other's changelogs (docs/semantics.md §7).

``test_byte_compat.py`` shows that both sides write the same changelog records for every join
shape; the stores of a stream-stream join (two window stores with duplicates and the list-value
store of a left / outer join's unmatched records) cannot be dumped, so this module shows that
those records restore them, by restarting the application and going on:

- Kafka Streams -> kspark: the first part of a case runs on the oracle; kspark restores every
  logged store of its topology from the oracle's changelog records and runs the second part,
  which must give what Kafka Streams gives when it restores its own stores from the same records
  and runs the second part (the oracle's ``restore_and_run`` request);
- kspark -> Kafka Streams: the same, with kspark running the first part.

Random cases: the strategies of ``oracle_cases.STRATEGIES`` for every join shape whose stores keep
changelogs (``join_restore.RESTARTED_SHAPES``; a global join keeps none), for one case in two with
denser inputs (:func:`dense_records`), split at a random input; ``KSPARK_BYTE_COMPAT_EXAMPLES``
cases per shape (default 40), derandomized. Every case drawn is compared, but only those whose
restored stores change the records Kafka Streams outputs after the restart (against a start with
empty stores) count among the examples: most drawn cases have no record meeting across the split,
and 40 of those would leave whole stores unchecked. What is compared, the normalisations, and the
three known differences (Kafka Streams' own restarts going on otherwise than it would have without
the restart; left out of the random cases) are documented in ``join_restore.py``.

Fixed cases pin the moments that matter: an unmatched record waiting in the outer-join store at
the split and emitted after the restart when its window closes, duplicates restored with their
sequence numbers, a table-table join's materialized result restored; and each known difference,
with both behaviours.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from byte_compat import without_failures
from comparison import to_oracle
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from join_restore import (
    RESTARTED_SHAPES,
    changelogs,
    known_difference,
    kspark_restore_and_run,
    normalised,
    oracle_request,
    parts,
    restart_difference,
)
from kspark_joins import JOIN_SHAPES
from oracle_cases import KEYS, STRATEGIES

from oracle import OracleCaseError

EXAMPLES = int(os.environ.get("KSPARK_BYTE_COMPAT_EXAMPLES", "40"))


DIRECTIONS = ("Kafka Streams -> kspark: both restored from Kafka Streams' changelogs",
              "kspark -> Kafka Streams: both restored from kspark's changelogs")


def first_parts(kafka_streams, case: dict, at: int) -> tuple[dict, dict]:
    """The changelogs the first part of ``case`` split at ``at`` writes: Kafka Streams', kspark's
    (of every logged store)."""
    first, _ = parts(case, at)
    return (changelogs(kafka_streams.run(to_oracle(first))),
            changelogs(kspark_restore_and_run(first, {})))


def restarted(kafka_streams, case: dict, at: int, logs: tuple[dict, dict] | None = None
              ) -> tuple[list[tuple[str, dict, list, list]], list[dict]]:
    """Both directions of ``case`` split at ``at``: ``(direction, restored changelogs, Kafka
    Streams' lines, kspark's lines)`` of the second part, each side restarted from the
    changelogs the first part wrote on one side (``logs``: :func:`first_parts`); and Kafka
    Streams' lines of the second part run with nothing restored."""
    _, second = parts(case, at)
    logs = logs or first_parts(kafka_streams, case, at)
    answers = kafka_streams.run_many([oracle_request(second, log) for log in logs]
                                     + [to_oracle(second)])
    for answer in answers:
        if isinstance(answer, OracleCaseError):
            raise answer
    out = [(direction, log, kafka, kspark_restore_and_run(second, log))
           for direction, log, kafka in zip(DIRECTIONS, logs, answers)]
    return out, answers[-1]  # type: ignore[return-value]


def check_restarts(kafka_streams, case: dict, at: int) -> bool | None:
    """Both directions compared (``join_restore.restart_difference``); whether the restored
    stores changed the records Kafka Streams outputs in the second part; ``None`` (nothing
    compared) if the restart may show a known difference (``join_restore.known_difference``)."""
    logs = first_parts(kafka_streams, case, at)
    if known_difference(case, at, *logs) is not None:
        return None
    results, fresh = restarted(kafka_streams, case, at, logs)
    for direction, log, kafka, kspark in results:
        report = restart_difference(case, at, direction, log, kafka, kspark)
        assert report is None, report
    return any(_records(kafka) != _records(fresh) for _, _, kafka, _ in results)


@st.composite
def dense_records(draw: st.DrawFn, topics: tuple[str, ...], null_keys: bool) -> list[dict]:
    """Inputs that meet across a split: few null keys and values (half of ``oracle_cases``'
    records have a null key, half a null value: a join drops them), small steps in time with now
    and then a jump that closes the windows of a stream-stream join."""
    n = draw(st.integers(4, 24))
    ts = draw(st.integers(0, 40))
    key = st.sampled_from((*KEYS, *KEYS, None) if null_keys else KEYS)
    value = st.sampled_from(("x", "y", "z", "xy", "yz", "zz", None))
    out = []
    for _ in range(n):
        ts = max(0, ts + draw(st.one_of(st.integers(-10, 15), st.just(0), st.integers(30, 90))))
        out.append({"topic": draw(st.sampled_from(topics)), "key": draw(key),
                    "value": draw(value), "ts": ts})
    return out


@st.composite
def split_cases(draw: st.DrawFn, shape: str) -> tuple[dict, int]:
    """A case of ``shape`` (``oracle_cases.STRATEGIES``; for one case in two its inputs are
    :func:`dense_records` instead) and where to split its inputs: both parts non-empty when the
    case has two inputs or more (an empty part: a restart with nothing restored or nothing to
    do)."""
    case = without_failures(draw(STRATEGIES[shape]))
    if draw(st.booleans()):
        topics = ("left",) if case["params"].get("self") else ("left", "right")
        # null keys only where the strategy draws them (it leaves them out where Kafka Streams
        # fails on them)
        null_keys = any(i.get("key") is None for i in case["inputs"])
        case = {**case, "inputs": draw(dense_records(topics, null_keys))}
    n = len(case["inputs"])
    return case, draw(st.integers(1, n - 1) if n >= 2 else st.integers(0, n))


@pytest.mark.parametrize("shape", RESTARTED_SHAPES)
def test_join_restarted_from_the_other_sides_changelogs(kafka_streams, shape: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(split_cases(shape))
    def run(split: tuple[dict, int]) -> None:
        case, at = split
        # compared whatever the case (but a known difference); counted among the examples only
        # if the restored stores mattered: the second part's records differ from those of a
        # start with empty stores
        assume(check_restarts(kafka_streams, case, at) is True)

    run()


# -- fixed cases -------------------------------------------------------------------------------
def _records(lines: list[dict]) -> list[tuple[Any, Any, int]]:
    return [(line["key"], line["value"], line["ts"]) for line in lines if line["kind"] == "record"]


def _left(key: str, value: str | None, ts: int) -> dict:
    return {"topic": "left", "key": key, "value": value, "ts": ts}


def _right(key: str, value: str | None, ts: int) -> dict:
    return {"topic": "right", "key": key, "value": value, "ts": ts}


def _long(n: int) -> str:
    return n.to_bytes(8, "big", signed=True).hex()


def _restarted_records(kafka_streams, case: dict, at: int) -> list[tuple]:
    """The second part's records, the same on both sides in both directions (checked)."""
    results, _ = restarted(kafka_streams, case, at)
    for direction, logs, kafka, kspark in results:
        report = restart_difference(case, at, direction, logs, kafka, kspark)
        assert report is None, report
    (_, _, first, _), (_, _, second, _) = results
    assert _records(first) == _records(second)
    return _records(first)


@pytest.mark.parametrize("kind", ["left", "outer"])
def test_unmatched_record_emitted_after_the_restart(kafka_streams, kind: str) -> None:
    """a@10 (left, and for the outer join c@12 on the right) has no partner when the first part
    ends: it waits in the outer-join store, nothing is emitted. After the restart (the shared
    time tracker at -1 again, the smallest outer-store timestamp forgotten), b@40 closes their
    windows (10 + 10 < 40; 12 + 10 < 40) and the restored records are emitted with their own
    timestamps, as without the restart."""
    case = {"shape": "stream_join", "params": {"kind": kind, "diff": 10, "store_type": "rocksdb"},
            "inputs": [_left("a", "x", 10), *([_right("c", "r", 12)] if kind == "outer" else []),
                       _left("b", "y", 40)]}
    at = len(case["inputs"]) - 1
    first, _ = parts(case, at)
    kafka_first = kafka_streams.run(first)
    assert _records(kafka_first) == []
    shared = changelogs(kafka_first)["KSTREAM-OUTERSHARED-0000000004-store"]
    # timestamp, side (1: left), key -> [left "x"]
    assert shared[0] == {"key": _long(10) + "01" + b"a".hex(),
                         "value": "01" "00000001" "00000002" "01" + b"x".hex(), "ts": 10}
    expected = [("a", "x+null", 10)] + ([("c", "null+r", 12)] if kind == "outer" else [])
    assert _restarted_records(kafka_streams, case, at) == expected
    assert _records(kafka_streams.run(case)) == expected  # as without the restart


def test_duplicates_restored_with_their_sequence_numbers(kafka_streams) -> None:
    """Two left records of one key and timestamp are two entries of the window store (sequence
    numbers 1 and 2 in their changelog keys); both are restored and both join the right record
    of the second part."""
    case = {"shape": "stream_join", "params": {"kind": "inner", "diff": 5, "store_type": "rocksdb"},
            "inputs": [_left("a", "x", 10), _left("a", "y", 10), _right("a", "r", 12)]}
    first, _ = parts(case, 2)
    for lines in (kafka_streams.run(first), kspark_restore_and_run(first, {})):
        this = changelogs(lines)["KSTREAM-JOINTHIS-0000000004-store"]
        assert this == [{"key": b"a".hex() + _long(10) + "00000001", "value": b"x".hex(), "ts": 10},
                        {"key": b"a".hex() + _long(10) + "00000002", "value": b"y".hex(), "ts": 10}]
    assert _restarted_records(kafka_streams, case, 2) == [("a", "x+r", 12), ("a", "y+r", 12)]


def test_a_logged_null_moves_the_restored_stores_stream_time(kafka_streams) -> None:
    """A null value reaches the join's window store (``KStreamJoinWindow`` puts every keyed
    record): a store with duplicates stores nothing and keeps its stream time, but the put is
    logged. Restored, the changelog's null at 120,000 moves the store's observed stream time, as
    Kafka Streams' segmented stores restore every record: the segment of a@10 has expired (one
    minute segments, retention 20 ms) and the right record after the restart joins nothing.
    Without the restart it joins a@10."""
    params = {"kind": "inner", "diff": 10, "store_type": "rocksdb"}
    case = {"shape": "stream_join", "params": params,
            "inputs": [_left("a", "x", 10), _left("a", None, 120_000), _right("a", "r", 15)]}
    assert _records(kafka_streams.run(case)) == [("a", "x+r", 15)]
    assert _restarted_records(kafka_streams, case, 2) == []


@pytest.mark.parametrize("result_caching", [False, True])
def test_table_join_restored_with_its_materialized_result(kafka_streams,
                                                          result_caching: bool) -> None:
    """A table-table join with a materialized result: all three stores are restored. After the
    restart a join with the restored right side (a), a delete (b) and a key the second part does
    not touch (c, still in the result store: restored, not recomputed)."""
    case = {"shape": "table_join",
            "params": {"kind": "inner", "materialized": True, "result_caching": result_caching},
            "inputs": [_left("a", "x", 1), _right("a", "r", 2), _left("b", "y", 3),
                       _right("b", "s", 4), _left("c", "w", 5), _right("c", "t", 6),
                       _left("a", "z", 7), _right("b", None, 8)]}
    results, _ = restarted(kafka_streams, case, 6)
    for direction, logs, kafka, kspark in results:
        assert sorted(logs) == ["left-store", "result", "right-store"]
        assert logs["result"] == [{"key": b"a".hex(), "value": b"x+r".hex(), "ts": 2},
                                  {"key": b"b".hex(), "value": b"y+s".hex(), "ts": 4},
                                  {"key": b"c".hex(), "value": b"w+t".hex(), "ts": 6}]
        report = restart_difference(case, 6, direction, logs, kafka, kspark)
        assert report is None, report
        assert _records(kafka) == [("a", "z+r", 7), ("b", None, 8)]
        assert [(line["key"], line["value"], line["ts"]) for line in kafka
                if line["kind"] == "store" and line["store"] == "result"] == [
            ("a", "z+r", 7), ("c", "w+t", 6)]
    assert _records(kafka_streams.run(case))[3:] == [("a", "z+r", 7), ("b", None, 8)]


# -- the known differences -----------------------------------------------------------------------
def _restarted_from_kafka_streams(kafka_streams, case: dict, at: int) -> tuple[list, list, dict]:
    """Kafka Streams' and kspark's lines of the second part, both restarted from Kafka Streams'
    changelogs of the first part; and those changelogs."""
    first, second = parts(case, at)
    logs = changelogs(kafka_streams.run(first))
    kafka = kafka_streams.run(oracle_request(second, logs))
    return kafka, kspark_restore_and_run(second, logs), logs


def _stores(lines: list[dict]) -> list[tuple[Any, Any, int]]:
    return [(line["key"], line["value"], line["ts"]) for line in lines if line["kind"] == "store"]


def _needs(shape: str, *params: str) -> None:
    missing = [p for p in params if p not in JOIN_SHAPES[shape]]
    if missing:
        pytest.skip(f"shape {shape!r} has no parameters {missing}")


def test_kafka_streams_overwrites_restored_duplicates(kafka_streams) -> None:
    """Known difference 1 (``join_restore.py``), both behaviours. a@10 "x" before the restart,
    a@10 "y" and a right a@10 after it. Without a restart both left records join. Restarted,
    Kafka Streams numbers "y" 1 again, the restored "x"'s number, and overwrites "x": the right
    record joins "y" only. kspark numbers "y" 2 and goes on as without the restart."""
    case = {"shape": "stream_join", "params": {"kind": "inner", "diff": 5, "store_type": "rocksdb"},
            "inputs": [_left("a", "x", 10), _left("a", "y", 10), _right("a", "r", 10)]}
    kafka, kspark, logs = _restarted_from_kafka_streams(kafka_streams, case, 1)
    this = "KSTREAM-JOINTHIS-0000000004-store"

    def numbers(lines: list[dict]) -> list[str]:
        return [line["key"][-8:] for line in lines
                if line["kind"] == "changelog" and line["store"] == this]

    assert [r["key"][-8:] for r in logs[this]] == ["00000001"]
    uninterrupted = [("a", "x+r", 10), ("a", "y+r", 10)]
    assert _records(kafka_streams.run(case)) == uninterrupted
    assert _records(kafka) == [("a", "y+r", 10)] and numbers(kafka) == ["00000001"]
    assert _records(kspark) == uninterrupted and numbers(kspark) == ["00000002"]
    assert known_difference(case, 1, logs) == "duplicates renumbered from 1"


def test_kafka_streams_loses_its_restored_join_buffer(kafka_streams) -> None:
    """Known difference 2, both behaviours. A stream-table join with a grace period of 10 ms:
    b@202 waits in the buffer when the first part ends. Without a restart b@300 lets it out
    (joined at 202) and waits itself. Restarted, Kafka Streams restores the buffer's time-first
    changelog keys as key-first ones: b@202 is never emitted, and b@300 and b@400 are joined at
    once (no buffer write). kspark goes on as without the restart."""
    _needs("stream_table_join", "versioned", "grace")
    case = {"shape": "stream_table_join", "params": {"kind": "left", "versioned": 100, "grace": 10},
            "inputs": [_left("b", "xx", 202), _left("b", "yy", 300), _left("b", "zz", 400)]}
    kafka, kspark, logs = _restarted_from_kafka_streams(kafka_streams, case, 1)
    (buffer,) = [name for name in logs if name.endswith("-Buffer")]
    # a prefix byte, the timestamp, the key, a sequence number
    assert [r["key"] for r in logs[buffer]] == ["00" + _long(202) + b"b".hex() + "00000001"]
    uninterrupted = [("b", "xx+null", 202), ("b", "yy+null", 300)]
    assert _records(kafka_streams.run(case)) == uninterrupted
    assert _records(kafka) == [("b", "yy+null", 300), ("b", "zz+null", 400)]
    assert not [line for line in kafka if line["kind"] == "changelog" and line["store"] == buffer]
    assert _records(kspark) == uninterrupted
    assert known_difference(case, 1, logs) == "a restored join buffer"


def test_kafka_streams_restore_resurrects_a_deleted_version(kafka_streams) -> None:
    """Known difference 3, both behaviours. A versioned table (history 34 ms): a deleted at 5672,
    then an older version of a at 5654, then b at 15423. Without a restart a is deleted (the
    left record at 15424 finds nothing). Restarted, Kafka Streams restores the changelog with the
    stream time at its end (15423): the tombstone's segment has expired, the tombstone is
    dropped, and "xz" becomes a's latest value again. kspark goes on as without the restart."""
    _needs("stream_table_join", "versioned")
    case = {"shape": "stream_table_join", "params": {"kind": "left", "versioned": 34},
            "inputs": [_right("a", None, 5672), _right("a", "xz", 5654), _right("b", "y", 15423),
                       _left("a", "l", 15424)]}
    kafka, kspark, logs = _restarted_from_kafka_streams(kafka_streams, case, 3)
    assert [(r["key"], r["value"], r["ts"]) for r in logs["table"]] == [
        (b"a".hex(), None, 5672), (b"a".hex(), b"xz".hex(), 5654), (b"b".hex(), b"y".hex(), 15423)]
    assert _records(kafka_streams.run(case)) == [("a", "l+null", 15424)]
    assert _records(kafka) == [("a", "l+xz", 15424)] and _stores(kafka) == [("a", "xz", 5654)]
    assert _records(kspark) == [("a", "l+null", 15424)] and _stores(kspark) == []
    assert known_difference(case, 3, logs) == "a deleted version resurrected"


# -- the request's refusals ----------------------------------------------------------------------
@pytest.mark.parametrize(("request_", "message"), [
    ({"request": "restore_and_run"}, "request 'restore_and_run' needs \"case\""),
    ({"request": "restore_and_run", "case": {"request": "serde"}}, "needs a \"case\" with a shape"),
    ({"request": "restore_and_run", "case": {"shape": "table_join", "params": {"kind": "left"}},
      "changelogs": {"store": []}},
     "the case's topology has no store 'store' (its stores: [left-store, right-store])"),
    ({"request": "restore_and_run",
      "case": {"shape": "stream_join", "params": {"kind": "inner", "diff": 5, "logging": False,
                                                  "store_name": "j"}},
      "changelogs": {"j-this-join-store": []}},
     "store 'j-this-join-store' keeps no changelog in this case"),
    ({"request": "restore_and_run", "case": {"shape": "table_join", "params": {"kind": "left"}},
      "changelogs": {"left-store": [{"key": "61", "value": "78"}]}},
     "a changelog record needs a hex \"key\" and a \"ts\""),
])
def test_restore_and_run_refuses_what_it_cannot_do(kafka_streams, request_: dict,
                                                   message: str) -> None:
    with pytest.raises(OracleCaseError) as info:
        kafka_streams.run(request_)
    assert message in str(info.value)


def test_restored_lines_are_compared_whole() -> None:
    """The comparison keeps every line but a duplicates store's sequence numbers (and a join
    buffer's timestamps); a difference reads as the case, the split, the restored changelogs and
    both sides' lines whole."""
    case = {"shape": "stream_join", "params": {"kind": "inner", "diff": 5},
            "inputs": [_left("a", "x", 10), _right("a", "r", 12)]}
    line = {"kind": "changelog", "store": "KSTREAM-JOINTHIS-0000000004-store",
            "key": b"a".hex() + _long(10) + "00000007", "value": "78", "ts": 10, "headers": []}
    (text,) = normalised(case, [line])
    assert b"a".hex() + _long(10) + "<seq>" in text and '"ts": 10' in text
    table = {"shape": "table_join", "params": {"kind": "left"}, "inputs": []}
    assert normalised(table, [{**line, "store": "left-store"}])[0].count("00000007") == 1
    record = {"kind": "record", "key": "a", "window": None, "value": "x+r", "ts": 12,
              "tombstone": False}
    assert restart_difference(case, 1, "K", {}, [record, line], [record, line]) is None
    report = restart_difference(case, 1, "Kafka Streams -> kspark", {"s": []}, [record, line],
                                [line])
    assert report is not None
    assert report.splitlines()[:2] == ["Kafka Streams -> kspark", f"case: {json.dumps(case)}"]
    assert "split at input 1 of 2" in report and "second part: " + json.dumps(
        [_right("a", "r", 12)]) in report
    assert "-" + json.dumps(record, sort_keys=True) in report.splitlines()
    assert " " + normalised(case, [line])[0] in report.splitlines()
