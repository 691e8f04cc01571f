"""The bad-input matrix on Spark for file sources (docs/semantics.md §8): JSON-lines and Parquet
by a defect in one row by the handler. With ``fail`` the query stops with a kspark error whose
first line names the file and line (or the topic, partition and offset), and what the earlier
micro-batch committed is kept; with ``log_and_continue`` and a dead-letter topic the row is
skipped, counted under its reason and dead-lettered, and every other row is processed. An
oversized record is processed like any other. (Kafka as the source: tests/kafka.)"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kspark import Topology, io, serdes
from kspark.errors import KsparkError
from kspark.serdes import Serde
from kspark.spark import StreamsApp

pytestmark = pytest.mark.spark


class Pages(Serde):
    """A user's value serde for pages that refuses the page "/bad"."""

    name = "Pages"

    def _serialize(self, value):
        return json.dumps(value).encode()

    def _deserialize(self, data):
        page = json.loads(data)
        if page == "/bad":
            raise ValueError("not a page we know")
        return page


S = serdes.String()
LOG = {"default.deserialization.exception.handler": "log_and_continue",
       "errors.dead.letter.queue.topic.name": "dead"}

#: defect -> (formats it exists in, the bad row's fields, key serde, value serde,
#:            the error's first line must contain, the metrics reason when skipped)
DEFECTS = {
    "not JSON": (("jsonl",), None, S, serdes.Json(), "Deserialization error at topic 'in'",
                 "deserialization-error"),
    "timestamp not a number": (("jsonl", "parquet"), {"user": "u9", "page": "/x", "ts": "soon"},
                               S, serdes.Json(), "line 2: timestamp field 'ts' is not a whole "
                               "number: 'soon'", "invalid-timestamp"),
    "timestamp missing": (("jsonl", "parquet"), {"user": "u9", "page": "/x", "ts": None},
                          S, serdes.Json(), "line 2: timestamp field 'ts' is null",
                          "invalid-timestamp"),
    "negative timestamp": (("jsonl", "parquet"), {"user": "u9", "page": "/x", "ts": -5},
                           S, serdes.Json(), "invalid (negative) timestamp -5",
                           "invalid-timestamp"),
    "value the serde cannot read": (("jsonl", "parquet"),
                                    {"user": "u9", "page": "/bad", "ts": 7}, S, Pages(),
                                    "Pages serde cannot deserialize", "deserialization-error"),
    "windowed key too short": (("jsonl", "parquet"), {"user": "u9", "page": "/x", "ts": 7},
                               serdes.SessionWindowed(S), serdes.Json(),
                               "session-windowed key shorter than 16 bytes",
                               "deserialization-error"),
}
GOOD = [{"user": f"u{i}", "page": f"/p{i}", "ts": 1000 + i} for i in range(3)]


def _topology(key_serde, value_serde) -> Topology:
    topo = Topology().add_source("src", "in", key_serde, value_serde)
    return topo.add_sink("out", "out", "src", key_serde=key_serde, value_serde=value_serde)


def _write(path: str, fmt: str, rows: list, name: str) -> None:
    """One data file of ``rows`` (a ``str`` row is written as that raw line)."""
    if fmt == "jsonl":
        with open(os.path.join(path, f"{name}.jsonl"), "w") as f:
            f.write("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        return
    columns = {c: [r[c] for r in rows] for c in ("user", "page", "ts")}
    if any(isinstance(v, str) for v in columns["ts"]):  # a text column, as a CSV export gives
        columns["ts"] = [None if v is None else str(v) for v in columns["ts"]]
    pq.write_table(pa.table(columns), os.path.join(path, f"{name}.parquet"))


def _run(spark, app_dir, fmt, defects, config, name, out=None):
    """Batch 0: a good row; batch 1: a good row, one bad row per defect (all of one source
    topology), a good row and an oversized one."""
    _, _, key_serde, value_serde, _, _ = DEFECTS[defects[0]]
    bad = [DEFECTS[d][1] or "{not json" for d in defects]
    src = os.path.join(app_dir, name, "in")
    os.makedirs(src)
    _write(src, fmt, GOOD[:1], "a-0")  # batch 0: committed before the bad rows are read
    _write(src, fmt, [GOOD[1], *bad, GOOD[2],
                      {"user": "big", "page": "x" * 1_500_000, "ts": 5}], "a-1")
    topics = {"in": io.files(src, format=fmt, key_field="user", value_field="page",
                             timestamp_field="ts", max_files_per_trigger=1),
              "out": out or io.memory(key_serde, value_serde),
              "dead": io.memory(serdes.Bytes(), serdes.Bytes())}
    app = StreamsApp(_topology(key_serde, value_serde), name, topics, spark=spark,
                     config=config, checkpoint_dir=os.path.join(app_dir, name, "ck"))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return topics, app


CASES = [(fmt, defect) for defect, spec in DEFECTS.items() for fmt in spec[0]]
#: the defects of each format that share a source topology, tried together
GROUPS = [(fmt, [d for d, spec in DEFECTS.items() if fmt in spec[0] and spec[2:4] == serdes_])
          for fmt in ("jsonl", "parquet")
          for serdes_ in dict.fromkeys(tuple(spec[2:4]) for spec in DEFECTS.values())]
GROUPS = [(fmt, defects) for fmt, defects in GROUPS if defects]


@pytest.mark.parametrize("fmt, defect", CASES)
def test_with_fail_the_query_stops_with_a_kspark_error_naming_where(spark, app_dir, fmt,
                                                                    defect):
    name = f"fail-{fmt}-{defect.replace(' ', '-')}"
    out = io.memory(S, S)
    with pytest.raises(KsparkError) as caught:
        _run(spark, app_dir, fmt, [defect], None, name, out)
    first = str(caught.value).splitlines()[0]
    assert DEFECTS[defect][4] in first
    assert re.search(r"source file \S+\.(jsonl|parquet) line 2:|topic 'in' partition 0 offset "
                     r"\d+ \(source 'src'\)", first), first
    assert caught.value.__cause__ is not None  # Spark's exception, kept as the cause
    if DEFECTS[defect][2] is S:  # batch 0 (the first file) was committed and is kept
        assert [k for k, _, _ in out.records()] == ["u0"]


@pytest.mark.parametrize("fmt, defects", GROUPS,
                         ids=[f"{fmt}-{'+'.join(d)}" for fmt, d in GROUPS])
def test_with_log_and_continue_the_row_is_skipped_counted_and_dead_lettered(spark, app_dir,
                                                                           fmt, defects):
    name = f"skip-{fmt}-{len(defects)}-{defects[0].replace(' ', '-')}"
    topics, app = _run(spark, app_dir, fmt, defects, LOG, name)
    metrics = app.metrics()
    dead = topics["dead"].records()
    out = topics["out"].records()
    if DEFECTS[defects[0]][2] is not S:  # every row's key is too short: all are skipped
        reason = DEFECTS[defects[0]][5]
        assert out == [] and metrics[f"dropped-records-{reason}"] == len(dead) >= 4
        return
    reasons = Counter(DEFECTS[d][5] for d in defects)
    for reason, count in reasons.items():
        assert metrics[f"dropped-records-{reason}"] == count
    assert metrics["dropped-records-total"] == len(defects) == len(dead)
    assert sorted(k for k, _, _ in out) == ["big", "u0", "u1", "u2"]
    big = next(v for k, v, _ in out if k == "big")
    assert len(big) == 1_500_000  # the oversized record went through whole
    for _, raw, _ in dead:  # each bad row as it was read
        assert raw is not None and (b"/bad" in raw or b"soon" in raw or b"not json" in raw
                                    or b'"ts": null' in raw or b"/x" in raw)
