"""Record headers against Kafka Streams (docs/semantics.md §1): both test drivers given the
same inputs with headers (one, none, a repeated name, a null and an empty value) must forward
the same headers. Aggregations of streams and tables, cached or not, and a repartition carry
the headers of the record that made each result, windowed ones too (a session's uncached
updates none, as in Kafka Streams). The ``headers`` shape of ``test_differential.py`` draws
such cases at random (``header_cases.py``)."""

from __future__ import annotations

import pytest
from comparison import LONG_RETENTION, to_oracle
from kspark_side import run as run_kspark

HEADERS = [[["h", "01"]], [], [["d", "01"], ["d", None]], [["e", ""]], []]
INPUTS = [{"key": key, "value": value, "ts": ts, "headers": HEADERS[i % len(HEADERS)]}
          for i, (key, value, ts) in enumerate(
              [("a", 1, 10), ("b", 2, 12), ("a", 3, 11), ("c", 4, 30), ("b", None, 31),
               ("a", 5, 40), ("c", 6, 25), ("b", 7, 50), ("a", 8, 52), ("c", 9, 60)])]


def record_lines(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["kind"] == "record"]


@pytest.mark.parametrize("case", [
    {"shape": "stream_aggregate", "params": {"op": op, "caching": caching,
                                             "store_type": "in_memory"}}
    for op in ("sum", "reduce_max") for caching in (True, False)
] + [
    {"shape": "table_aggregate", "params": {"op": "sum", "groups": 2, "caching": caching,
                                            "source_caching": caching,
                                            "store_type": "in_memory"}}
    for caching in (True, False)
] + [
    {"shape": "repartition", "params": {"rekey": True, "caching": False,
                                        "store_type": "in_memory"}},
], ids=lambda case: f"{case['shape']}-{'-'.join(map(str, case['params'].values()))}")
def test_results_carry_the_headers_of_the_record_that_made_them(kafka_streams, case) -> None:
    case = {**case, "inputs": INPUTS}
    expected = record_lines(kafka_streams.run(to_oracle(case)))
    assert sum(bool(r.get("headers")) for r in expected) >= 3
    assert record_lines(run_kspark(case)) == expected


def _windowed(shape: str, emit: str, caching: bool) -> dict:
    params = {"op": "sum", "grace": 15, "emit": emit, "caching": caching,
              "retention": LONG_RETENTION,
              "store_type": "rocksdb" if emit == "close" else "in_memory"}
    params.update({"size": 20, "advance": 10} if shape == "time_window" else {"diff": 15})
    # a time window's aggregator gets null values (Kafka Streams' sum fails on them)
    return {"shape": shape, "params": params,
            "inputs": [{**item, "value": item["value"] or 0} for item in INPUTS]}


@pytest.mark.parametrize(("shape", "emit", "caching"), [
    ("time_window", "update", True), ("time_window", "update", False),
    ("time_window", "close", False), ("sliding", "update", True), ("sliding", "update", False),
    ("sliding", "close", False)])
def test_windowed_results_carry_the_headers_of_the_record_that_made_them(
        kafka_streams, shape, emit, caching) -> None:
    """An update has the record's headers (cached: the window's last record's); a final
    result those of the record that closed its window."""
    case = _windowed(shape, emit, caching)
    expected = record_lines(kafka_streams.run(to_oracle(case)))
    assert sum(bool(r.get("headers")) for r in expected) >= 2
    assert record_lines(run_kspark(case)) == expected


@pytest.mark.parametrize(("emit", "caching"), [("update", True), ("update", False),
                                               ("close", False)])
def test_session_results_carry_headers_as_kafka_streams_forwards_them(
        kafka_streams, emit, caching) -> None:
    """Kafka Streams forwards an uncached session update (and the removal of a merged session)
    without headers, a cached one with those of the record that made it, a final result with
    those of the record that closed the session."""
    case = {"shape": "session", "params": {"op": "sum", "gap": 5, "grace": 15, "emit": emit,
                                           "caching": caching, "retention": LONG_RETENTION,
                                           "store_type": "rocksdb" if emit == "close"
                                           else "in_memory"},
            "inputs": [{**item, "value": item["value"] or 0} for item in INPUTS]}
    expected = record_lines(kafka_streams.run(to_oracle(case)))
    assert any(r.get("headers") for r in expected) == (caching or emit == "close")
    assert record_lines(run_kspark(case)) == expected
