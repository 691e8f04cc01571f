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

Comparison (:func:`restart_difference`): the output records of the second part, in order, the
stores' contents after it (the dumped stores of a shape: ``table``, ``left-store``,
``right-store``, ``result``) and the changelog records the second part writes, line for line,
with two normalisations: the sequence numbers in the changelog keys of a window store with
duplicates (known difference 1 below: after a restart the two sides number new puts
differently), and the timestamps of a join buffer's changelog records (a stream-table join with
a grace period: Kafka Streams writes them without one, kspark with the buffered record's;
``comparison`` documents it).

Known differences: Kafka Streams 4.3.1 itself does not go on after a restart as it would have
gone on without one in these three cases; kspark does (its restarted application gives what an
uninterrupted one gives). The random cases leave them out (:func:`known_difference`);
``test_join_byte_compat.py`` pins each, with both behaviours.

1. Duplicates renumbered (:func:`renumbered_duplicates`): a window store with duplicates (a
   stream-stream join's) numbers its puts from a counter that starts at 0 in every store
   instance (``RocksDBWindowStore.seqnum``, ``ChangeLoggingWindowBytesStore.seqnum``) and that a
   restore does not move; after a restart a new record with the key and timestamp of a restored
   one takes a restored record's number again and overwrites it (or, with another number, sorts
   before it). kspark numbers on after the largest restored number (``WindowStore.restore``).
2. A restored join buffer (:func:`restored_join_buffer`): the buffer of a stream-table join with
   a grace period writes its changelog keys time first (``TimeFirstWindowKeySchema``), but
   ``RocksDBTimeOrderedKeyValueBytesStore`` restores them as key-first window keys
   (``WindowKeySchema::extractStoreTimestamp``, ``fromNonPrefixWindowKey``): the restored
   records' timestamps are garbage (bytes of the timestamp and the key), the buffer's observed
   stream time jumps far ahead, the restored records are never emitted and later records are
   joined at once instead of buffered.
3. A deleted version resurrected (:func:`resurrected_version`): ``RocksDBVersionedStore``
   restores a batch of changelog records with the stream time at the batch's end
   (``restoreBatch``, ``endOfBatchStreamTime``): a tombstone whose segment that time has
   expired is dropped, so an older record of the key restored after it becomes the key's latest
   value again, although the tombstone superseded it before the restart.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from comparison import to_oracle
from kspark_side import build, run

from kspark import TopologyTestDriver
from kspark.state.internals.changelog import ChangelogCodec

#: the join shapes whose stores keep changelogs (a global join's store has none: its topic is
#: its changelog)
RESTARTED_SHAPES = ("stream_join", "stream_table_join", "table_join", "fk_join")


# -- the parts of a case --------------------------------------------------------------------------
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


# -- Kafka Streams --------------------------------------------------------------------------------
def oracle_request(second: dict[str, Any], logs: dict[str, list[dict]]) -> dict[str, Any]:
    """The oracle's request to restore the stores of ``second``'s topology from ``logs`` and
    run ``second``'s inputs."""
    return {"request": "restore_and_run", "case": to_oracle(second), "changelogs": logs}


# -- kspark ---------------------------------------------------------------------------------------
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
        # a record written without timestamp is read back with none: -1, as Kafka's consumer
        entries = [(codec.decode_key(bytes.fromhex(r["key"])),
                    codec.decode_value(None if r["value"] is None else bytes.fromhex(r["value"])),
                    -1 if r["ts"] is None else r["ts"]) for r in logs.get(name, ())]
        driver.get_state_store(name).restore(entries)


def kspark_restore_and_run(case: dict[str, Any], logs: dict[str, list[dict]]) -> list[dict]:
    """kspark's lines for ``case`` run after every logged store of its topology is restored
    from ``logs``, in the oracle's form (as ``kspark_side.run``, but with ``"changelogs": true``
    the changelog of every logged store of the topology, as the oracle prints a join shape's:
    ``kspark_side.Built.stores`` may name fewer). The application id is the oracle's: it names
    the repartition topics, which a join buffer's records hold (their record context)."""
    return run(case, every_changelog=True,
               before=lambda driver, built: restore_in_driver(driver, built.topology, logs))


# -- comparison -----------------------------------------------------------------------------------
def duplicate_stores(case: dict[str, Any]) -> set[str]:
    """The window stores with duplicates of ``case``'s topology (a stream-stream join's)."""
    builders = build(case).topology.store_builders
    return {name for name, b in builders.items()
            if b.kind == "window" and b.params.get("retain_duplicates")}


def buffer_stores(case: dict[str, Any]) -> set[str]:
    """The join buffers of ``case``'s topology (a stream-table join's with a grace period)."""
    return _stores_of_kind(case, "time_ordered_buffer")


def normalised(case: dict[str, Any], lines: list[dict]) -> list[str]:
    """``lines`` as compared (module doc): a duplicates store's changelog key without its
    sequence number (the last 4 bytes); a join buffer's changelog record without timestamp."""
    dups, buffers = duplicate_stores(case), buffer_stores(case)
    out = []
    for line in lines:
        if line["kind"] == "changelog" and line["store"] in dups:
            line = {**line, "key": line["key"][:-8] + "<seq>"}
        if line["kind"] == "changelog" and line["store"] in buffers:
            line = {**line, "ts": None}
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


def _stores_of_kind(case: dict[str, Any], kind: str) -> set[str]:
    builders = build(case).topology.store_builders
    return {name for name, b in builders.items() if b.kind == kind}


def renumbered_duplicates(case: dict[str, Any], at: int) -> bool:
    """Known difference 1 (module doc): whether the second part of ``case`` split at ``at`` puts
    a record into a window store with duplicates under the key and timestamp of a record
    restored into that store: only then can the sequence numbers that a restarted Kafka Streams
    hands out from 1 again reorder or overwrite restored records."""
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


def restored_join_buffer(case: dict[str, Any], logs: dict[str, list[dict]]) -> bool:
    """Known difference 2 (module doc): whether ``logs`` restore records into a join buffer."""
    return any(logs.get(name) for name in buffer_stores(case))


def resurrected_version(case: dict[str, Any], logs: dict[str, list[dict]]) -> bool:
    """Known difference 3 (module doc): whether the changelog of a versioned store in ``logs``
    holds a tombstone of a key followed by an older record of that key."""
    for name in _stores_of_kind(case, "versioned"):
        deleted: dict[str, int] = {}  # key -> latest tombstone's timestamp
        for r in logs.get(name, ()):
            if r["key"] in deleted and r["ts"] < deleted[r["key"]]:
                return True
            if r["value"] is None:
                deleted[r["key"]] = max(r["ts"], deleted.get(r["key"], r["ts"]))
    return False


def known_difference(case: dict[str, Any], at: int, *logs: dict[str, list[dict]]) -> str | None:
    """Which of Kafka Streams' restart behaviours that kspark does not share (module doc) a
    restart of ``case`` split at ``at`` from any of ``logs`` may show, or ``None``."""
    if renumbered_duplicates(case, at):
        return "duplicates renumbered from 1"
    if any(restored_join_buffer(case, log) for log in logs):
        return "a restored join buffer"
    if any(resurrected_version(case, log) for log in logs):
        return "a deleted version resurrected"
    return None
