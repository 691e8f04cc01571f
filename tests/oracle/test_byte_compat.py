"""Byte compatibility with Kafka Streams 4.3.1, in both directions (docs/semantics.md §7).

Against Kafka Streams' own code, in the oracle's JVM (``oracle/.../ByteCompat.java``):

- the windowed key serdes: kspark's bytes decoded by ``WindowedSerdes`` and Kafka Streams'
  bytes decoded by kspark, with the same refusals;
- changelogs: the oracle's shapes run through both ``TopologyTestDriver``s write the same
  changelog records (key and value bytes, record timestamps) for key-value (timestamped and
  plain), window and session stores; fixed cases pin the layouts in hex, random cases
  (``KSPARK_BYTE_COMPAT_EXAMPLES`` per shape, default 40) cover the rest;
- restoration: kspark's store restored from Kafka Streams' changelog records holds what Kafka
  Streams' store holds, and a Kafka Streams store restored by its own state manager from
  kspark's changelog records holds what kspark's store holds.

The normalisations are documented in ``byte_compat.py`` and pinned below.
"""

from __future__ import annotations

import os

import pytest
from byte_compat import (
    changelog_difference,
    changelog_records,
    kspark_case,
    kspark_window_puts,
    restore_difference,
    restore_in_kspark,
    restore_request,
    store_lines,
    without_failures,
)
from comparison import to_oracle
from hypothesis import HealthCheck, given, settings
from kspark_side import build
from kspark_side import run as run_kspark
from oracle_cases import STATELESS_SHAPES, STRATEGIES

from kspark import SerializationError, StreamsError, Window, Windowed, serdes
from oracle import OracleCaseError

EXAMPLES = int(os.environ.get("KSPARK_BYTE_COMPAT_EXAMPLES", "40"))
MAX_LONG = (1 << 63) - 1


# -- windowed key serdes --------------------------------------------------------------------------
def _serde_request(kafka_streams, windowed: str, keys: list[Windowed], raw: list[bytes],
                   size: int | None = None) -> tuple[list[dict], list[dict]]:
    request = {"request": "serde", "windowed": windowed, "size": size,
               "serialize": [{"key": k.key, "start": k.window.start, "end": k.window.end}
                             for k in keys],
               "deserialize": [b.hex() for b in raw]}
    lines = kafka_streams.run(request)
    return lines[:len(keys)], lines[len(keys):]


def _decoded(line: dict) -> Windowed | None:
    return None if "error" in line else Windowed(line["key"], Window(line["start"], line["end"]))


def _kspark_decoded(serde: serdes.Serde, data: bytes) -> Windowed | None:
    try:
        return serde.deserialize(data)
    except SerializationError:
        return None


@pytest.mark.parametrize("windowed", ["session", "time"])
def test_windowed_key_serdes_match_kafka_streams_both_ways(kafka_streams, windowed: str) -> None:
    size = 86_400_000
    spans = [(0, 0), (1000, 1005), (1_700_000_000_000, 1_700_000_000_000 + size), (5, 5 + size)]
    keys = [Windowed(k, Window(s, s + size if windowed == "time" else e))
            for k, (s, e) in zip(["a", "", "user-7|click", "ユーザー"], spans)]
    serde = (serdes.SessionWindowed(serdes.String()) if windowed == "session"
             else serdes.TimeWindowed(serdes.String(), size))
    ours = [serde.serialize(k) for k in keys]
    theirs, decoded = _serde_request(kafka_streams, windowed, keys, ours, size)
    assert [bytes.fromhex(line["bytes"]) for line in theirs] == ours  # the same bytes
    assert [_decoded(line) for line in decoded] == keys  # Kafka Streams reads kspark's
    assert [serde.deserialize(bytes.fromhex(line["bytes"])) for line in theirs] == keys


@pytest.mark.parametrize(("windowed", "raw"), [
    ("session", b"a"),                                               # too short
    ("session", b"a" + (5).to_bytes(8, "big") + (9).to_bytes(8, "big")),  # end before start
    ("session", b"a" + (-5).to_bytes(8, "big", signed=True) * 2),    # negative start
    ("session", b"a" + (9).to_bytes(8, "big") + (5).to_bytes(8, "big")),  # [5, 9]
    ("time", b"a"),
    ("time", b"a" + (-5).to_bytes(8, "big", signed=True)),
    ("time", b"a" + (MAX_LONG - 2).to_bytes(8, "big")),  # the end is cut at Long.MAX_VALUE
    ("time", b"a" + MAX_LONG.to_bytes(8, "big")),        # ... and then not after the start
    ("time", b"a" + (7).to_bytes(8, "big")),
], ids=["session-short", "session-end-before-start", "session-negative", "session-ok",
        "time-short", "time-negative", "time-end-cut", "time-end-not-after-start", "time-ok"])
def test_windowed_key_serdes_refuse_what_kafka_streams_refuses(kafka_streams, windowed: str,
                                                               raw: bytes) -> None:
    """Fixed in kspark: Kafka Streams' ``Window`` refuses a negative start, and its time-window
    deserializer cuts the end at ``Long.MAX_VALUE``; kspark's serdes decoded both silently."""
    size = 10
    _, (line,) = _serde_request(kafka_streams, windowed, [], [raw], size)
    serde = (serdes.SessionWindowed(serdes.String()) if windowed == "session"
             else serdes.TimeWindowed(serdes.String(), size))
    assert _kspark_decoded(serde, raw) == _decoded(line), line


# -- changelog layouts, pinned -------------------------------------------------------------------
def _changelog(lines: list[dict]) -> list[tuple]:
    return [(line["store"], line["key"], line["value"], line["ts"])
            for line in lines if line["kind"] == "changelog"]


def _both(kafka_streams, case: dict) -> tuple[list[dict], list[dict]]:
    case = {**case, "changelogs": True}
    return kafka_streams.run(to_oracle(case)), run_kspark(kspark_case(case))


A, B = b"a".hex(), b"b".hex()


def _long(n: int) -> str:
    return n.to_bytes(8, "big", signed=True).hex()


@pytest.mark.parametrize(("case", "expected"), [
    # key-value (timestamped): key bytes; raw value; the aggregate's timestamp
    ({"shape": "stream_aggregate", "params": {"op": "sum", "caching": False},
      "inputs": [{"key": "a", "value": 3, "ts": 20}, {"key": "a", "value": 4, "ts": 10}]},
     [("store", A, _long(3), 20), ("store", A, _long(7), 20)]),
    # window: key bytes, window start (int64), sequence number 0 (int32)
    ({"shape": "time_window", "params": {"op": "count", "size": 10, "caching": False},
      "inputs": [{"key": "a", "value": 1, "ts": 13}, {"key": "b", "value": 1, "ts": 15}]},
     [("store", A + _long(10) + "00000000", _long(1), 13),
      ("store", B + _long(10) + "00000000", _long(1), 15)]),
    # session: key bytes, end then start (int64 each); a tombstone for a merged session
    ({"shape": "session", "params": {"op": "count", "gap": 10, "caching": False},
      "inputs": [{"key": "a", "value": 1, "ts": 1000}, {"key": "a", "value": 1, "ts": 1005}]},
     [("store", A + _long(1000) + _long(1000), _long(1), 1000),
      ("store", A + _long(1000) + _long(1000), None, 1005),
      ("store", A + _long(1005) + _long(1000), _long(2), 1005)]),
    # plain key-value (Processor API): a delete of an absent key is logged too (fixed in kspark)
    ({"shape": "punctuator", "params": {},
      "inputs": [{"key": "b", "value": None, "ts": 33}, {"key": "a", "value": 2, "ts": 34}]},
     [("store", B, None, 33), ("store", A, _long(2), 34)]),
    # a table source without cache logs the tombstone of an absent key (fixed in kspark)
    ({"shape": "table_aggregate", "params": {"op": "count", "groups": 1, "caching": False,
                                             "source_caching": False},
      "inputs": [{"key": "a", "value": None, "ts": 4}, {"key": "a", "value": 20, "ts": 5}]},
     [("source", A, None, 4), ("source", A, _long(20), 5), ("store", b"g0".hex(), _long(1), 5)]),
], ids=["key_value", "window", "session", "plain_key_value", "table_source"])
def test_changelog_layouts(kafka_streams, case: dict, expected: list[tuple]) -> None:
    kafka, kspark = _both(kafka_streams, case)
    assert _changelog(kafka) == _changelog(kspark) == expected


def test_session_changelog_timestamps(kafka_streams) -> None:
    """a@1003 falls into [1000, 1005]: the remove of [1000, 1005] and the put of the new
    aggregate are logged at 1003, the record's timestamp (kspark logged them at 1005, the
    session's end, until this test found it)."""
    case = {"shape": "session", "params": {"op": "count", "gap": 10, "caching": False},
            "inputs": [{"key": "a", "value": 1, "ts": t} for t in (1000, 1005, 1003)]}
    kafka, kspark = _both(kafka_streams, case)
    assert [ts for *_, ts in _changelog(kafka)] == [1000, 1005, 1005, 1003, 1003]
    assert _changelog(kspark) == _changelog(kafka)


@pytest.mark.parametrize("shape", ["session", "sliding", "time_window"])
def test_on_window_close_changelog_in_the_test_driver(kafka_streams, shape: str) -> None:
    """a@20 and a@20 again: Kafka Streams builds a session or sliding store emitting on window
    close without a cache whatever ``Materialized`` says (``SessionStoreMaterializer#builder``,
    ``SlidingWindowStoreMaterializer#builder``), so a session's remove and re-put by one record
    are two changelog records; kspark keeps the cache (README "Deviations"), which logs the
    last; without it kspark logs what Kafka Streams logs (``byte_compat.kspark_case``). Time
    windows keep the cache on both sides (``WindowStoreMaterializer#builder``): the same records
    with the case as it is."""
    params = {"op": "count", "emit": "close", "caching": True}
    params.update({"session": {"gap": 10}, "sliding": {"diff": 10},
                   "time_window": {"size": 10}}[shape])
    case = {"shape": shape, "params": params, "changelogs": True,
            "inputs": [{"key": "a", "value": 1, "ts": t} for t in (10, 20, 20)]}
    kafka = _changelog(kafka_streams.run(to_oracle(case)))
    cached = _changelog(run_kspark(case))
    assert _changelog(run_kspark(kspark_case(case))) == kafka
    if shape == "session":
        assert [value for _, _, value, _ in kafka] == [_long(1), None, _long(2), None, _long(3)]
        assert [value for _, _, value, _ in cached] == [_long(1), None, _long(2), _long(3)]
    else:
        assert cached == kafka
        assert (kspark_case(case) == case) == (shape == "time_window")


@pytest.mark.parametrize("duplicates", [False, True])
def test_processor_api_window_store_changelog(kafka_streams, duplicates: bool) -> None:
    """Fixed in kspark: a store with duplicates numbers its puts from 1 (kspark: from 0) and
    logs a ``None`` put under its own number (kspark: not at all); every store logs a put into
    an expired segment, which its store drops (kspark dropped it without logging)."""
    inputs = [("a", 1, 5), ("a", 2, 6), ("a", None, 7), ("b", 3, 1000), ("a", 4, 15),
              ("a", None, 16), ("b", 5, 1001)]
    request = {"request": "window_puts", "retention": 100, "size": 10, "duplicates": duplicates,
               "inputs": [{"key": k, "value": v, "ts": t} for k, v, t in inputs]}
    kafka = kafka_streams.run(request)
    assert [line["key"][-8:] for line in kafka][:3] == (
        ["00000001", "00000002", "00000003"] if duplicates else ["00000000"] * 3)
    assert [line["ts"] for line in kafka] == [t for *_, t in inputs]  # the expired ones too
    assert kspark_window_puts(request) == kafka


# -- random cases: changelogs and restores in both directions -----------------------------------
def check_case(kafka_streams, case: dict) -> None:
    case = {**without_failures(case), "changelogs": True}
    kafka = kafka_streams.run(to_oracle(case))
    kspark = run_kspark(kspark_case(case))
    report = changelog_difference(case, kafka, kspark)
    assert report is None, report
    built = build(case)
    for store, kind in built.stores.items():
        if kind == "logged" or not built.topology.store_builders[store].logging:
            # a join's stores are restored and run on in test_join_byte_compat.py; a global
            # store keeps no changelog (its topic is one)
            continue
        restored = restore_in_kspark(case, store, changelog_records(kafka, store))
        report = restore_difference(case, restored, store_lines(kafka, store))
        assert report is None, f"kspark restored from Kafka Streams' changelog:\n{report}"
        restored = kafka_streams.run(
            restore_request(case, store, changelog_records(kspark, store)))
        report = restore_difference(case, restored, store_lines(kspark, store))
        assert report is None, f"Kafka Streams restored from kspark's changelog:\n{report}"


@pytest.mark.parametrize("shape", sorted(set(STRATEGIES) - set(STATELESS_SHAPES)))
def test_changelogs_and_restores_match_kafka_streams(kafka_streams, shape: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(STRATEGIES[shape])
    def run(case: dict) -> None:
        check_case(kafka_streams, case)

    run()


# -- bad input and refusals -----------------------------------------------------------------------
def test_kafka_streams_session_changelog_attached_as_window_store_fails_clearly(
        kafka_streams) -> None:
    """A changelog whose layout is not the attached store's stops kspark with an error naming
    the store, the topic, partition and offset (Kafka Streams' own session changelog here)."""
    session = {"shape": "session", "params": {"op": "count", "gap": 10},
               "inputs": [{"key": "a", "value": 1, "ts": 1000}], "changelogs": True}
    records = changelog_records(kafka_streams.run(session), "store")
    as_window = {"shape": "time_window", "params": {"op": "count", "size": 10}, "inputs": []}
    with pytest.raises(StreamsError, match=(
            r"topic 'a-store-changelog' partition 0 offset 0 .*store 'store' \(window store\).*"
            r"sequence number 1000, not 0")):
        restore_in_kspark(as_window, "store", records, topic="a-store-changelog")
    window = {**as_window, "inputs": [{"key": "a", "value": 1, "ts": 1000}], "changelogs": True}
    records = changelog_records(kafka_streams.run(window), "store")
    with pytest.raises(StreamsError, match=(
            r"topic 'b-store-changelog' partition 0 offset 0 .*store 'store' \(session store\).*"
            r"13 bytes .*at least 16 bytes")):
        restore_in_kspark(session, "store", records, topic="b-store-changelog")


@pytest.mark.parametrize(("request_", "message"), [
    ({"request": "translate"}, "unknown request 'translate' (known: describe, restore, serde, "
                               "window_puts)"),
    ({"request": "serde", "windowed": "hopping"}, "unknown windowed serde 'hopping'"),
    ({"request": "restore", "kind": "list_value"}, "unknown store kind 'list_value'"),
    ({"request": "restore", "kind": "window", "size": 10}, "needs \"retention\""),
    ({"request": "restore", "kind": "window", "retention": 100, "size": 10,
      "records": [{"key": "610000000000000000", "value": "00", "ts": 1}]},
     "Exception caught while trying to restore state from kspark-oracle-store-changelog-0"),
    ({"shape": "session", "params": {"op": "count", "gap": 5}, "changelog": True},
     "unknown case field 'changelog'"),
])
def test_the_oracle_refuses_what_it_cannot_express(kafka_streams, request_: dict,
                                                   message: str) -> None:
    """Requests and cases the oracle cannot express or run are refused with the reason (the
    shapes' own refusals are pinned in ``test_differential.py``)."""
    with pytest.raises(OracleCaseError) as info:
        kafka_streams.run(request_)
    assert message in str(info.value)


@pytest.mark.parametrize("shape", ["time_window", "sliding"])
def test_a_deleted_window_is_logged_at_the_records_time(kafka_streams, shape: str) -> None:
    """Fixed in kspark: a window whose aggregator returns null (a:0 at 0, after the window got
    timestamp 1) is deleted; Kafka Streams logs the delete with the record's timestamp
    (``ChangeLoggingTimestampedWindowBytesStore#log``: a null value has no timestamp of its own),
    kspark logged the window's."""
    params = {"time_window": {"size": 10}, "sliding": {"diff": 10, "grace": 10}}[shape]
    case = {"shape": shape, "params": {"op": "sum", "none_on": 0, "caching": False, **params},
            "inputs": [{"key": "a", "value": 2, "ts": 1}, {"key": "a", "value": 0, "ts": 0}]}
    kafka, kspark = _both(kafka_streams, case)
    assert _changelog(kafka)[-1][2:] == (None, 0)
    assert _changelog(kspark) == _changelog(kafka)


@pytest.mark.parametrize("caching", [False, True])
@pytest.mark.parametrize("shape", ["stream_aggregate", "table_aggregate"])
def test_a_deleted_aggregate_is_logged_at_the_records_time(kafka_streams, shape: str,
                                                           caching: bool) -> None:
    """Fixed in kspark: an aggregate deleted by an older record (the aggregator returns null on
    a:3 at 5, or the subtractor on the removed 1 at 5, after the aggregate got timestamp 10) is
    put at max(5, 10) = 10 without a value; Kafka Streams keeps no timestamp with a null value
    and logs the delete at the record's timestamp, 5
    (``ChangeLoggingTimestampedKeyValueBytesStore#put``), and with caching forwards it at 5
    too (the cache entry's record context); kspark logged and forwarded it at 10."""
    if shape == "stream_aggregate":
        params = {"op": "sum", "none_on": 3}
        inputs = [{"key": "a", "value": 1, "ts": 10}, {"key": "a", "value": 3, "ts": 5}]
    else:
        params = {"op": "sum", "groups": 1, "subtractor_none_on": 1, "source_caching": False}
        inputs = [{"key": "a", "value": 1, "ts": 10}, {"key": "a", "value": None, "ts": 5}]
    case = {"shape": shape, "params": {**params, "caching": caching}, "inputs": inputs}
    kafka, kspark = _both(kafka_streams, case)
    assert _changelog(kafka)[-1][2:] == (None, 5)
    tombstone = [line["ts"] for line in kafka if line["kind"] == "record" and line["tombstone"]]
    assert tombstone == [5 if caching else 10]
    assert kspark == kafka
