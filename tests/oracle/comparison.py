"""The mapping of a case onto the oracle's configuration, and the comparison of the two sides'
normalised lines (the cases themselves: ``oracle_cases.py``).

Shared by ``test_differential.py`` (CI, a few hundred cases per shape), the byte-compatibility
tests and ``benchmarks/differential_fuzz.py`` (many more).

Config mapping (what makes the two sides comparable; every item names its reason):

- Both drivers commit after every input record: Kafka Streams' ``TopologyTestDriver`` runs
  ``process``, ``maybePunctuateStreamTime``, ``prepareCommit`` (which flushes the caches) and
  ``postCommit`` for each record (``completeAllProcessableWork`` in its source), and the same
  after ``advanceWallClockTime``; kspark's driver does the same. Caching is therefore live on
  both sides within one record (e.g. a session's tombstone and re-put of the same window become
  one update) and is compared as such, with caching on and off.
- Session and sliding-window stores: kspark keeps 1 ms more than ``gap + grace`` (sliding:
  ``2 * diff + grace``), README "Deviations from Kafka Streams, on purpose", item 2. The oracle
  is given that same retention explicitly (``Materialized.withRetention``), so both stores
  expire alike; ``test_differential.py::test_deviation_session_retention_one_ms_more`` shows the
  two behaviours at Kafka Streams' default retention.
- Caching on (with emit on update): Kafka Streams' caching layer serves windows and sessions
  that its store has already expired (``CachingSessionStore`` / ``CachingWindowStore`` merge the
  cache's entries without the store's retention filter, and the 10 MB cache of the test driver
  keeps every entry), so at the default retention a record can merge with a session that the
  store no longer returns, and ``fetch`` / ``all`` return expired entries. kspark never returns
  expired data (docs/semantics.md §6: "Reads never return expired data ... even while its segment
  still exists"). Session and sliding cases with caching on and emit on update therefore use a
  retention long enough that nothing expires within the case (the same explicit
  ``Materialized`` retention on both sides);
  ``test_differential.py::test_deviation_kafka_cache_serves_expired_sessions`` shows both
  behaviours at the default retention. Time windows never read a window that can have expired
  (a record updates only windows that end after the close time, and the retention is at least
  size + grace): they draw any retention, and their expired entries, which Kafka Streams'
  cache still serves in the store dump, are left out of the comparison (``live_entries``).
  Every other case draws the default retention (the minimum), a little more or much more.
- on_window_close of time and sliding windows: Kafka Streams forwards the final results after
  the closing record has written its own windows, by ``fetchAll(lastClose - size + 1, close -
  size)`` on a store whose observed stream time that write has just advanced; without a cache
  in front of that store (time windows with caching off; sliding windows always), windows that
  closed *and* expired with that record (a jump in stream time larger than the retention) are
  never forwarded. kspark forwards every window exactly once (docs/semantics.md §3). These
  cases use a long retention on both sides (nothing expires, so Kafka Streams forwards every
  window; time windows with caching on draw any retention: the cache still holds the closed
  window); ``test_differential.py::test_kafka_loses_final_results_of_expired_windows`` shows
  both behaviours at the default retention. (Sessions do not have this problem in Kafka
  Streams' default RocksDB store.) Kafka Streams builds session and sliding stores emitting on
  window close without a cache whatever ``caching`` says (``SessionStoreMaterializer`` /
  ``SlidingWindowStoreMaterializer#builder``); kspark keeps it (README "Deviations"), which
  changes only their changelogs (``byte_compat.py``).
- A stream-table join's grace buffer (``<join>-Buffer``): Kafka Streams writes its changelog
  records without a timestamp (``RocksDBTimeOrderedKeyValueBuffer#logValue`` and
  ``#logTombstone`` send them with a ``null`` timestamp: the producer's clock stamps them on a
  broker; its test driver shows none), kspark with the buffered record's; their keys and values
  are compared byte for byte, their timestamps not (``without_buffer_timestamps``).
- User functions that return ``None`` or raise, keys of the wrong type (``none_on``,
  ``raise_on``, ``int_key_on``, the merger's and subtractor's ``merger_*`` / ``subtractor_*``,
  a branch predicate's ``raise_on``, a punctuator's ``*_raise_at``; tests/oracle/README.md): a
  case stopped by such a failure ends with an ``error`` line on both sides, naming the input
  (a record, or a wall-clock advance for a wall-clock punctuator) and the kind of failure; the
  records before it are compared as any others, the messages not (they are each engine's
  own).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

#: a retention longer than any case's time span (used with caching on, see the module doc)
LONG_RETENTION = 10_000_000

WINDOWED_SHAPES = ("session", "time_window", "sliding")


# -- the mapping onto the oracle ------------------------------------------------------------------
def kspark_retention(case: dict[str, Any]) -> int | None:
    """The retention kspark's store for ``case`` really has (README deviation 2: sessions and
    sliding windows keep 1 ms more than the minimum), or ``None`` for non-windowed shapes."""
    p = case["params"]
    shape = case["shape"]
    grace = p.get("grace", 0)
    if shape == "session":
        minimum = p["gap"] + grace
        return max(p.get("retention") or minimum, minimum + 1)
    if shape == "sliding":
        minimum = 2 * p["diff"] + grace
        return max(p.get("retention") or minimum, minimum + 1)
    if shape == "time_window":
        return p.get("retention") or p["size"] + grace
    return None


def to_oracle(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` as the oracle runs it: session and sliding stores get kspark's retention
    (README deviation 2, see the module doc). Everything else is passed as is."""
    if case["shape"] not in ("session", "sliding"):
        return case
    params = dict(case["params"])
    params["retention"] = kspark_retention(case)
    return {**case, "params": params}


# -- comparison -----------------------------------------------------------------------------------
def split(lines: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    records = [line for line in lines if line["kind"] == "record"]
    stores = [line for line in lines if line["kind"] == "store"]
    return records, stores


def live_entries(case: dict[str, Any], lines: list[dict]) -> list[dict]:
    """``lines`` without the window and session store entries that the store's retention has
    expired: docs/semantics.md §6, "Reads never return expired data: a session is expired once
    ``end <= stream_time - retention``, a window once ``start <= stream_time - retention``, even
    while its segment still exists". Kafka Streams' caching layer and its time-ordered stores
    (used for on_window_close) return such entries; kspark never does (see the module doc).

    The store's observed stream time is the largest segment timestamp written (session end,
    window start), computed from the oracle's own output and the case, not from kspark's: the
    largest among the entries, and for sessions and time windows the one the newest record
    with a key writes (never late; a write of a deleted aggregate, ``none_on``, moves the
    store's time too: ``AbstractRocksDBSegmentedBytesStore#put`` / ``#remove``): its own
    timestamp, or the start of its latest time window."""
    retention = kspark_retention(case)
    if retention is None or case["shape"] not in WINDOWED_SHAPES:
        return lines
    index = 1 if case["shape"] == "session" else 0  # the segment timestamp: end / start
    stamps = [line["window"][index] for line in lines if line["kind"] == "store"]
    if case["shape"] != "sliding":
        advance = case["params"].get("advance") or case["params"].get("size") or 0
        stamps += [i["ts"] - (i["ts"] % advance if advance else 0)
                   for i in case.get("inputs") or () if i.get("key") is not None and "ts" in i]
    if not stamps:
        return lines
    bound = max(stamps) - retention
    return [line for line in lines
            if line["kind"] != "store" or line["window"][index] > bound]


def without_buffer_timestamps(lines: list[dict]) -> list[dict]:
    """``lines`` with the timestamps of grace buffers' changelog records left out: Kafka
    Streams writes them without one (the producer's clock stamps them), kspark with the
    buffered record's (module doc)."""
    return [{**line, "ts": None} if line["kind"] == "changelog"
            and line["store"].endswith("-Buffer") else line for line in lines]


def described(lines: list[dict]) -> list[dict]:
    """``lines`` with a topology description as a line per line of its text (for the diff)."""
    out = []
    for line in lines:
        if line.get("kind") == "describe":
            out.extend({"kind": "describe", "line": t} for t in line["text"].splitlines())
        else:
            out.append(line)
    return out


def difference(case: dict[str, Any], kafka: list[dict], kspark: list[dict]) -> str | None:
    """``None`` if both sides produced the same records (in order) and store contents, else a
    readable report: the case and a unified diff of the lines. Only the live entries of Kafka
    Streams' window and session stores are compared (:func:`live_entries`)."""
    kspark = without_buffer_timestamps(kspark)
    if kafka == kspark:
        return None
    kafka, kspark = described(kafka), described(kspark)
    kafka = live_entries(case, kafka)
    if kafka == kspark:
        return None
    a = [json.dumps(line, sort_keys=True) for line in kafka]
    b = [json.dumps(line, sort_keys=True) for line in kspark]
    diff = "\n".join(difflib.unified_diff(a, b, "kafka-streams", "kspark", lineterm="", n=3))
    return f"case: {json.dumps(case)}\n{diff}"
