"""Join applications restarted from changelogs, on both sides (``test_join_byte_compat.py``).

A case's inputs are split into a first and a second part. The first part runs on one side with
``"changelogs": true``; its changelog records are what a restarted application finds on its
changelog topics. Each side then restores every store of the case's topology from them and runs
the second part:

- Kafka Streams: the oracle's ``restore_and_run`` request (``oracle/.../ByteCompat.java``): the
  case's topology in a ``TopologyTestDriver``, each store restored by the driver task's own
  ``ProcessorStateManager`` (the store's restore callback after the record converter Kafka
  Streams picks for it), then the inputs;
- kspark (:func:`kspark_restore_and_run`): the case's topology in kspark's
  ``TopologyTestDriver``, each logged store given its changelog entries, decoded with the
  store's own :class:`~kspark.state.internals.changelog.ChangelogCodec`, through its
  ``restore``, then the inputs.

Neither side keeps anything else: an operator's observed stream time starts afresh (a
stream-stream join's shared time tracker at -1, its smallest outer-store timestamp at
``Long.MAX_VALUE``), as in a restarted Kafka Streams application.

Comparison (:func:`restart_difference`): the output records of the second part, in order, and
the stores' contents after it (the dumped stores of a shape: ``table``, ``left-store``,
``right-store``, ``result``), line for line. The changelog records the second part writes are
compared too, with one normalisation: Kafka Streams numbers the puts of a window store with
duplicates (a stream-stream join's) from 1 again after a restart (its ``seqnum`` counters in
``RocksDBWindowStore`` and ``ChangeLoggingWindowBytesStore`` start at 0 and a restore does not
move them), kspark goes on after the largest restored number; the sequence numbers of such
stores' changelog keys are therefore left out (``test_join_byte_compat.py::
test_sequence_numbers_after_a_restart`` pins both).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from kspark_side import _changelog_lines, _key_fields, _store_lines, build
from oracle_cases import to_oracle

from kspark import TopologyTestDriver, serdes
from kspark.state.internals.changelog import ChangelogCodec

#: the join shapes whose stores keep changelogs on kspark's side (a global join's store has
#: none: its topic is its changelog; fk_join is not implemented on kspark's side yet)
RESTARTED_SHAPES = ("stream_join", "stream_table_join", "table_join")


# -- the parts of a case ----------------------------------------------------------------------------
def parts(case: dict[str, Any], at: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``case`` as two cases: the inputs before ``at`` (with ``"changelogs": true``) and the
    inputs from ``at`` on (with ``"changelogs": true`` too: the records the restarted application
    writes)."""
    inputs = list(case.get("inputs") or ())
    first = {**case, "inputs": inputs[:at], "changelogs": True}
    second = {**case, "inputs": inputs[at:], "changelogs": True}
    return first, second


def changelogs(lines: list[dict]) -> dict[str, list[dict]]:
    """store -> its changelog records (``{"key": hex, "value": hex | None, "ts": t}``), in the
    order they were written."""
    out: dict[str, list[dict]] = {}
    for line in lines:
        if line["kind"] == "changelog":
            out.setdefault(line["store"], []).append(
                {"key": line["key"], "value": line["value"], "ts": line["ts"]})
    return out


# -- Kafka Streams ----------------------------------------------------------------------------------
def oracle_request(second: dict[str, Any], logs: dict[str, list[dict]]) -> dict[str, Any]:
    """The oracle's request to restore the stores of ``second``'s topology from ``logs`` and
    run ``second``'s inputs."""
    return {"request": "restore_and_run", "case": to_oracle(second), "changelogs": logs}


# -- kspark -----------------------------------------------------------------------------------------
def logged_stores(case: dict[str, Any]) -> list[str]:
    """The stores of kspark's topology for ``case`` that keep a changelog, sorted."""
    builders = build(case).topology.store_builders
    return sorted(name for name, b in builders.items() if b.logging)


def restore_in_driver(driver: TopologyTestDriver, topology: Any,
                      logs: dict[str, list[dict]]) -> None:
    """Restore every logged store of ``topology`` in ``driver`` from its records in ``logs``
    (none: an empty changelog), decoded with the store's :class:`ChangelogCodec`."""
    builders = topology.store_builders
    logged = sorted(name for name, b in builders.items() if b.logging)
    unknown = sorted(set(logs) - set(logged))
    if unknown:
        raise AssertionError(f"changelogs of stores {unknown} that kspark's topology does not "
                             f"log (its logged stores: {logged})")
    for name in logged:
        codec = ChangelogCodec.for_builder(builders[name])
        entries = [(codec.decode_key(bytes.fromhex(r["key"])),
                    codec.decode_value(None if r["value"] is None else bytes.fromhex(r["value"])),
                    r["ts"]) for r in logs.get(name, ())]
        driver.get_state_store(name).restore(entries)


def kspark_restore_and_run(second: dict[str, Any], logs: dict[str, list[dict]]) -> list[dict]:
    """kspark's lines for ``second`` run after every logged store of its topology is restored
    from ``logs``, in the oracle's form (as ``kspark_side.run``)."""
    built = build(second)
    lines: list[dict[str, Any]] = []
    keys: set[str] = set()
    with TopologyTestDriver(built.topology, initial_wall_clock_ms=0) as driver:
        restore_in_driver(driver, built.topology, logs)
        inputs = {topic: driver.create_input_topic(topic, serdes.String(), serde)
                  for topic, serde in built.inputs.items()}
        out = driver.create_output_topic("out", built.out_key, built.out_value)

        def drain() -> None:
            for rec in out.read_records_to_list():
                lines.append({"kind": "record", **_key_fields(rec.key), "value": rec.value,
                              "ts": rec.timestamp, "tombstone": rec.value is None})

        for item in second.get("inputs") or ():
            if "advance_wall_clock" in item:
                driver.advance_wall_clock_time(item["advance_wall_clock"])
            else:
                if item.get("key") is not None:
                    keys.add(item["key"])
                inputs[item.get("topic", "in")].pipe_input(item.get("key"), item.get("value"),
                                                           item["ts"])
            drain()
        drain()
        if second.get("changelogs"):
            lines.extend(_changelog_lines(driver, built.stores))
        for name, kind in built.stores.items():
            lines.extend(_store_lines(driver, name, kind, keys))
    return lines


# -- comparison -------------------------------------------------------------------------------------
def duplicate_stores(case: dict[str, Any]) -> set[str]:
    """The window stores with duplicates of ``case``'s topology (a stream-stream join's)."""
    builders = build(case).topology.store_builders
    return {name for name, b in builders.items()
            if b.kind == "window" and b.params.get("retain_duplicates")}


def normalised(case: dict[str, Any], lines: list[dict]) -> list[str]:
    """``lines`` as compared (module doc): a duplicates store's changelog key without its
    sequence number (the last 4 bytes)."""
    dups = duplicate_stores(case)
    out = []
    for line in lines:
        if line["kind"] == "changelog":
            if line["store"] in dups:
                line = {**line, "key": line["key"][:-8] + "<seq>"}
        out.append(json.dumps(line, sort_keys=True))
    return out


def restart_difference(case: dict[str, Any], at: int, direction: str, logs: dict[str, list],
                       kafka: list[dict], kspark: list[dict]) -> str | None:
    """``None`` if both restarted applications wrote the same lines (module doc), else a report:
    the case, the split, the restored changelogs, and a diff showing both sides' lines whole."""
    a, b = normalised(case, kafka), normalised(case, kspark)
    if a == b:
        return None
    first, second = parts(case, at)
    diff = "\n".join(difflib.unified_diff(a, b, "kafka-streams (restarted)", "kspark (restarted)",
                                          lineterm="", n=max(len(a), len(b))))
    restored = "\n".join(f"  {store}: {json.dumps(records)}" for store, records in logs.items())
    return (f"{direction}\ncase: {json.dumps(case)}\nsplit at input {at} of "
            f"{len(case.get('inputs') or ())}\nfirst part: {json.dumps(first['inputs'])}\n"
            f"second part: {json.dumps(second['inputs'])}\nrestored changelogs:\n"
            f"{restored or '  (none)'}\n{diff}")


def renumbered_duplicates(case: dict[str, Any], at: int) -> bool:
    """Whether the second part of ``case`` split at ``at`` puts a record into a window store with
    duplicates under the key and timestamp of a record restored into that store: only then can
    the sequence numbers that a restarted Kafka Streams hands out again from 1 (module doc)
    reorder or overwrite restored records (``test_join_byte_compat.py::
    test_sequence_numbers_after_a_restart``)."""
    p = case.get("params") or {}
    if case["shape"] != "stream_join" or not p.get("logging", True):
        return False
    inputs = list(case.get("inputs") or ())

    def slot(r: dict) -> tuple[str, Any, int]:
        # a self-join puts each record into both of its stores
        return ("left" if p.get("self") else r.get("topic", "left"), r["key"], r["ts"])

    def stored(r: dict) -> bool:  # a join's window stores keep records with a key and a value
        return r.get("key") is not None and r.get("value") is not None

    restored = {slot(r) for r in inputs[:at] if stored(r)}
    return any(stored(r) and slot(r) in restored for r in inputs[at:])
