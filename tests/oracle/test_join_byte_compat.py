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

Random cases: the strategies of ``oracle_cases.STRATEGIES`` for every join shape kspark has whose
stores keep changelogs (``join_restore.RESTARTED_SHAPES``; a global join keeps none, fk_join is
not implemented on kspark's side yet), split at a random input, ``KSPARK_BYTE_COMPAT_EXAMPLES``
cases per shape (default 40), derandomized. What is compared, and the one normalisation, are
documented in ``join_restore.py``. Fixed cases pin the moments that matter: an unmatched record
waiting in the outer-join store at the split and emitted after the restart when its window
closes, duplicates restored with their sequence numbers, a table-table join's materialized
result restored; and the one difference found (``test_sequence_numbers_after_a_restart``).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from join_restore import (
    RESTARTED_SHAPES,
    changelogs,
    kspark_restore_and_run,
    normalised,
    oracle_request,
    parts,
    renumbered_duplicates,
    restart_difference,
)
from kspark_side import run as run_kspark
from oracle_cases import KEYS, STRATEGIES, to_oracle

from oracle import OracleCaseError

EXAMPLES = int(os.environ.get("KSPARK_BYTE_COMPAT_EXAMPLES", "40"))


def restarted(kafka_streams, case: dict, at: int) -> list[tuple[str, dict, list, list]]:
    """Both directions of ``case`` split at ``at``: ``(direction, restored changelogs, Kafka
    Streams' lines, kspark's lines)`` of the second part, each side restarted from the
    changelogs the first part wrote on one side."""
    first, second = parts(case, at)
    from_kafka = changelogs(kafka_streams.run(to_oracle(first)))
    from_kspark = changelogs(run_kspark(first))
    directions = [("Kafka Streams -> kspark: both restored from Kafka Streams' changelogs",
                   from_kafka),
                  ("kspark -> Kafka Streams: both restored from kspark's changelogs",
                   from_kspark)]
    answers = kafka_streams.run_many([oracle_request(second, logs) for _, logs in directions])
    out = []
    for (direction, logs), kafka in zip(directions, answers):
        if isinstance(kafka, OracleCaseError):
            raise kafka
        out.append((direction, logs, kafka, kspark_restore_and_run(second, logs)))
    return out


def check_restarts(kafka_streams, case: dict, at: int) -> None:
    for direction, logs, kafka, kspark in restarted(kafka_streams, case, at):
        report = restart_difference(case, at, direction, logs, kafka, kspark)
        assert report is None, report


@st.composite
def dense_records(draw: st.DrawFn, topics: tuple[str, ...]) -> list[dict]:
    """Inputs that meet across a split: few null keys and values (half of ``oracle_cases``'
    records have a null key, half a null value: a join drops them), small steps in time with now
    and then a jump that closes the windows of a stream-stream join."""
    n = draw(st.integers(2, 24))
    ts = draw(st.integers(0, 40))
    key = st.sampled_from(KEYS + KEYS + (None,))
    value = st.one_of(*[st.text(alphabet="xyz", min_size=1, max_size=2)] * 5, st.none())
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
    case = draw(STRATEGIES[shape])
    if draw(st.booleans()):
        topics = ("left",) if case["params"].get("self") else ("left", "right")
        case = {**case, "inputs": draw(dense_records(topics))}
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
        # the one difference (join_restore.py, test_sequence_numbers_after_a_restart)
        assume(not renumbered_duplicates(case, at))
        check_restarts(kafka_streams, case, at)

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
    results = restarted(kafka_streams, case, at)
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
    for lines in (kafka_streams.run(first), run_kspark(first)):
        this = changelogs(lines)["KSTREAM-JOINTHIS-0000000004-store"]
        assert this == [{"key": b"a".hex() + _long(10) + "00000001", "value": b"x".hex(), "ts": 10},
                        {"key": b"a".hex() + _long(10) + "00000002", "value": b"y".hex(), "ts": 10}]
    assert _restarted_records(kafka_streams, case, 2) == [("a", "x+r", 12), ("a", "y+r", 12)]


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
    results = restarted(kafka_streams, case, 6)
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


# -- the difference found ------------------------------------------------------------------------
#: a@10 "x" before the restart, a@10 "y" and a right a@10 after it
RENUMBERED = {"shape": "stream_join",
              "params": {"kind": "inner", "diff": 5, "store_type": "rocksdb"},
              "inputs": [_left("a", "x", 10), _left("a", "y", 10), _right("a", "r", 10)]}


def test_kafka_streams_numbers_duplicates_from_1_after_a_restart(kafka_streams) -> None:
    """Both behaviours. Kafka Streams' window stores with duplicates number their puts from a
    counter that starts at 0 in every store instance (``RocksDBWindowStore.seqnum`` and
    ``ChangeLoggingWindowBytesStore.seqnum``, 4.3.1) and that a restore does not move: after the
    restart "y" takes sequence number 1 again, the restored "x"'s number, and overwrites it, so
    the right record joins "y" only (without the restart: "x" and "y"). kspark goes on after the
    largest restored number (``WindowStore.restore``): "y" is number 2 and both join."""
    first, second = parts(RENUMBERED, 1)
    logs = changelogs(kafka_streams.run(first))
    kafka = kafka_streams.run(oracle_request(second, logs))
    kspark = kspark_restore_and_run(second, logs)
    this = "KSTREAM-JOINTHIS-0000000004-store"

    def this_keys(lines: list[dict]) -> list[str]:
        return [line["key"][-8:] for line in lines
                if line["kind"] == "changelog" and line["store"] == this]

    assert [r["key"][-8:] for r in logs[this]] == ["00000001"]
    assert _records(kafka_streams.run(RENUMBERED)) == [("a", "x+r", 10), ("a", "y+r", 10)]
    assert _records(kafka) == [("a", "y+r", 10)] and this_keys(kafka) == ["00000001"]
    assert _records(kspark) == [("a", "x+r", 10), ("a", "y+r", 10)]
    assert this_keys(kspark) == ["00000002"]
    assert renumbered_duplicates(RENUMBERED, 1)


@pytest.mark.xfail(strict=True, reason=(
    "kspark numbers a restored window store's duplicates on after the largest restored sequence "
    "number; Kafka Streams 4.3.1 starts again at 1 and overwrites restored records "
    "(test_kafka_streams_numbers_duplicates_from_1_after_a_restart)"))
def test_sequence_numbers_after_a_restart(kafka_streams) -> None:
    """The failing case: kspark restarted as Kafka Streams restarted, from either side's
    changelog (the random cases leave such splits out: ``join_restore.renumbered_duplicates``)."""
    check_restarts(kafka_streams, RENUMBERED, 1)


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
     "a changelog record needs a hex \"key\" and an integer \"ts\""),
])
def test_restore_and_run_refuses_what_it_cannot_do(kafka_streams, request_: dict,
                                                   message: str) -> None:
    with pytest.raises(OracleCaseError) as info:
        kafka_streams.run(request_)
    assert message in str(info.value)


def test_restored_lines_are_compared_whole() -> None:
    """The comparison keeps every line but a duplicates store's sequence numbers."""
    line = {"kind": "changelog", "store": "KSTREAM-JOINTHIS-0000000004-store",
            "key": b"a".hex() + _long(10) + "00000007", "value": "78", "ts": 10, "headers": []}
    (text,) = normalised(RENUMBERED, [line])
    assert b"a".hex() + _long(10) + "<seq>" in text
    table = {"shape": "table_join", "params": {"kind": "left"}, "inputs": []}
    assert normalised(table, [{**line, "store": "left-store"}])[0].count("00000007") == 1
