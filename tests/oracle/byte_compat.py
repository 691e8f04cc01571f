"""Byte compatibility with Kafka Streams (``test_byte_compat.py``): the comparison of both sides'
changelog records, and each side's store restored from the other side's changelog.

Both sides run the case's configuration and their changelog records are compared whole: key and
value bytes, timestamps and headers. Two normalisations remain:

- Session and sliding-window aggregations emitting on window close: Kafka Streams builds their
  store without a cache whatever ``Materialized`` says (``SessionStoreMaterializer#builder`` and
  ``SlidingWindowStoreMaterializer#builder`` in ``org.apache.kafka.streams.kstream.internals``:
  caching only when enabled *and* the emit strategy is not ``ON_WINDOW_CLOSE``), so it logs a
  session's remove and re-put by one record as two records; kspark keeps the cache (README
  "Deviations from Kafka Streams, on purpose"), which logs the last of them. kspark's side runs
  such a case with the store Kafka Streams really builds, caching off
  (``test_on_window_close_changelog_in_the_test_driver``). Time windows keep their cache on both
  sides (``WindowStoreMaterializer#builder`` honours ``Materialized`` whatever the strategy).
- A stream-table join's grace buffer: Kafka Streams writes its changelog records without a
  timestamp (``RocksDBTimeOrderedKeyValueBuffer#logValue`` / ``#logTombstone`` send a ``null``
  one), kspark with the buffered record's; their timestamps are not compared
  (``comparison.without_buffer_timestamps``).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from comparison import kspark_retention, live_entries, without_buffer_timestamps
from kspark_joins import JOIN_SHAPES
from kspark_side import STRING_OPS, _store_lines, build

from kspark import Processor, Stores, Topology, TopologyTestDriver, serdes

#: the shapes whose on-window-close store Kafka Streams builds without a cache (module doc)
UNCACHED_ON_CLOSE = ("session", "sliding")


#: case parameters that make a user function fail or a serializer refuse a key: a run they stop
#: is compared by test_differential.py; changelogs and restores need runs to their end
FAILING = ("raise_on", "int_key_on", "merger_raise_on", "subtractor_raise_on", "stream_raise_at",
           "wall_raise_at")


def without_failures(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` without the parameters of :data:`FAILING`."""
    params = case.get("params") or {}
    if not any(name in params for name in FAILING):
        return case
    return {**case, "params": {k: v for k, v in params.items() if k not in FAILING}}


def kspark_case(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` as kspark's side runs it for the changelog comparison: a session or sliding
    aggregation emitting on window close without a cache, the store Kafka Streams builds for it
    (module doc)."""
    params = case.get("params") or {}
    if (case.get("shape") in UNCACHED_ON_CLOSE and params.get("emit") == "close"
            and params.get("caching", True)):
        return {**case, "params": {**params, "caching": False}}
    return case


def changelog_difference(case: dict[str, Any], kafka: list[dict], kspark: list[dict]
                         ) -> str | None:
    """``None`` if both sides wrote the same changelog records (key and value bytes, timestamps
    but a grace buffer's, headers), else the case and a diff."""
    a = [json.dumps(line, sort_keys=True) for line in kafka if line["kind"] == "changelog"]
    b = [json.dumps(line, sort_keys=True) for line in without_buffer_timestamps(kspark)
         if line["kind"] == "changelog"]
    if a == b:
        return None
    diff = "\n".join(difflib.unified_diff(a, b, "kafka-streams", "kspark", lineterm="", n=2))
    return f"case: {json.dumps(case)}\n{diff}"


# -- stores restored from the other side's changelog ----------------------------------------------
#: the case parameter that makes a store versioned, by store (else ``versioned``)
VERSIONED_PARAMS = {"left-store": "left_versioned", "right-store": "right_versioned"}


def store_spec(case: dict[str, Any], store: str) -> dict[str, Any]:
    """What a store of ``case`` is: kind (``session``, ``window``, ``kv_ts``, ``kv``,
    ``versioned``), retention, window size and history, value type; the fields of the oracle's
    ``restore`` request."""
    p = case.get("params") or {}
    kind = build(case).stores[store]
    strings = p.get("op") in STRING_OPS or case["shape"] in JOIN_SHAPES
    spec: dict[str, Any] = {"store": store, "kind": kind,
                            "value": "string" if strings else "long",
                            "store_type": p.get("store_type", "rocksdb")}
    if kind in ("session", "window"):
        spec["retention"] = kspark_retention(case)
    if kind == "window":
        spec["size"] = p.get("size") or p["diff"]
    if kind == "versioned":
        spec["history"] = p[VERSIONED_PARAMS.get(store, "versioned")]
    return spec


def input_keys(case: dict[str, Any]) -> list[str]:
    return sorted({i["key"] for i in case.get("inputs") or () if i.get("key") is not None})


def changelog_records(lines: list[dict], store: str) -> list[dict]:
    return [{"key": line["key"], "value": line["value"], "ts": line["ts"]}
            for line in lines if line["kind"] == "changelog" and line["store"] == store]


def store_lines(lines: list[dict], store: str) -> list[dict]:
    return [line for line in lines if line["kind"] == "store" and line["store"] == store]


def restore_request(case: dict[str, Any], store: str, records: list[dict]) -> dict[str, Any]:
    """The oracle's request to restore a Kafka Streams store like ``store`` of ``case`` from
    ``records`` (changelog records with hex bytes) and print its contents."""
    return {"request": "restore", **store_spec(case, store), "keys": input_keys(case),
            "records": records}


def kspark_builder(spec: dict[str, Any]) -> Any:
    """A kspark store builder like the store ``spec`` describes (see :func:`store_spec`)."""
    values = serdes.String() if spec["value"] == "string" else serdes.Long()
    name, kind = spec["store"], spec["kind"]
    if kind == "session":
        return Stores.session_store(name, spec["retention"], key_serde=serdes.String(),
                                    value_serde=values)
    if kind == "window":
        return Stores.window_store(name, spec["retention"], spec["size"],
                                   key_serde=serdes.String(), value_serde=values)
    if kind == "versioned":
        return Stores.versioned_key_value_store(name, spec["history"], key_serde=serdes.String(),
                                                value_serde=values)
    return Stores.key_value_store(name, key_serde=serdes.String(), value_serde=values)


def restore_in_kspark(case: dict[str, Any], store: str, records: list[dict],
                      topic: str = "kspark-oracle-store-changelog") -> list[dict]:
    """kspark's store like ``store`` of ``case``, attached read-only to a changelog topic that
    holds ``records`` (piped into kspark's test driver as raw bytes), as the oracle prints a
    store."""
    spec = store_spec(case, store)
    topology = Topology().add_read_only_state_store(kspark_builder(spec), topic)
    with TopologyTestDriver(topology) as driver:
        for r in records:
            value = None if r["value"] is None else bytes.fromhex(r["value"])
            driver.pipe_raw(topic, bytes.fromhex(r["key"]), value, r["ts"])
        return _store_lines(driver, store, spec["kind"], set(input_keys(case)))


def restore_difference(case: dict[str, Any], restored: list[dict], original: list[dict]
                       ) -> str | None:
    """``None`` if a store restored from the other side's changelog holds what the other side's
    store holds (live entries: ``comparison.live_entries``)."""
    a = [json.dumps(x, sort_keys=True) for x in live_entries(case, restored)]
    b = [json.dumps(x, sort_keys=True) for x in live_entries(case, original)]
    if a == b:
        return None
    diff = "\n".join(difflib.unified_diff(b, a, "original", "restored", lineterm="", n=2))
    return f"case: {json.dumps(case)}\n{diff}"


# -- a Processor API window store ----------------------------------------------------------------
class WindowPuts(Processor):
    """The oracle's ``window_puts`` processor: ``put(key, value, ts - ts % size)``."""

    def __init__(self, size: int) -> None:
        self.size = size

    def init(self, context: Any) -> None:
        self.store = context.get_state_store("store")

    def process(self, record: Any) -> None:
        self.store.put(record.key, record.value, record.timestamp - record.timestamp % self.size)


def kspark_window_puts(request: dict[str, Any]) -> list[dict]:
    """kspark's changelog lines for the oracle's ``window_puts`` request."""
    size = request["size"]
    topology = Topology()
    topology.add_source("source", "in", key_serde=serdes.String(), value_serde=serdes.Long())
    topology.add_processor("puts", lambda: WindowPuts(size), "source")
    topology.add_state_store(Stores.window_store(
        "store", request["retention"], size, retain_duplicates=request["duplicates"],
        key_serde=serdes.String(), value_serde=serdes.Long()), "puts")
    lines = []
    with TopologyTestDriver(topology, config={"application.id": "kspark-oracle"}) as driver:
        topic = driver.create_input_topic("in", serdes.String(), serdes.Long())
        for i in request["inputs"]:
            topic.pipe_input(i["key"], i["value"], i["ts"])
        log = driver.create_output_topic(driver.changelog_topic("store"), serdes.Bytes(),
                                         serdes.Bytes())
        for rec in log.read_records_to_list():
            lines.append({"kind": "changelog", "store": "store", "key": rec.key.hex(),
                          "value": None if rec.value is None else rec.value.hex(),
                          "ts": rec.timestamp, "headers": [list(h) for h in rec.headers]})
    return lines
