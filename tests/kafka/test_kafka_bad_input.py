"""The bad-input matrix with Kafka as the source (docs/semantics.md §8; file sources:
tests/spark/test_spark_bad_input.py): a value the serde cannot read and a windowed key with too
few bytes, by ``fail`` (a kspark error whose first line names topic, partition and offset) and
``log_and_continue`` with a dead-letter topic (skipped, counted, dead-lettered with headers
naming the error and the origin). A record near Kafka's size limit is processed whole."""

from __future__ import annotations

import os
import re

import pytest
from kafka_util import BASE_MS, create, produce

from kspark import Topology, io, serdes
from kspark.errors import KsparkError
from kspark.spark import StreamsApp

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
S = serdes.String()
LOG = {"default.deserialization.exception.handler": "log_and_continue",
       "errors.dead.letter.queue.topic.name": "dead"}
BIG = 900_000  # under the broker's default 1 MB message size

#: defect -> (key serde of the source, the bad record's key and raw value, first-line text)
DEFECTS = {
    "value the serde cannot read": (S, ("u9", b"{not json"), "Json serde cannot deserialize"),
    "windowed key too short": (serdes.SessionWindowed(S), ("u9", b'"x"'),
                               "session-windowed key shorter than 16 bytes"),
}


def _run(spark, app_dir, bootstrap, topic, defect, config):
    key_serde, (bad_key, bad_value), _ = DEFECTS[defect]
    good = [(f"u{i}", f"/p{i}", BASE_MS + i) for i in range(3)]
    if key_serde is not S:  # windowed keys: the good records' keys are full windowed keys
        good = []
    create(bootstrap, topic, 1)
    records = [(k, v, ts) for k, v, ts in good] + [("big", "x" * BIG, BASE_MS + 5)]
    produce(bootstrap, topic, records, partitions=1)
    produce(bootstrap, topic, [(bad_key, bad_value, BASE_MS + 9)], partitions=1, raw=True)
    topics = {"in": io.kafka(bootstrap, topic), "out": io.memory(key_serde, serdes.Json()),
              "dead": io.memory(serdes.Bytes(), serdes.Bytes())}
    topo = Topology().add_source("src", "in", key_serde, serdes.Json())
    topo.add_sink("out", "out", "src", key_serde=key_serde, value_serde=serdes.Json())
    app = StreamsApp(topo, f"{topic}-app", topics, spark=spark, config=config,
                     checkpoint_dir=os.path.join(app_dir, topic))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return topics, app


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_with_fail_a_bad_kafka_record_stops_the_query_naming_it(spark, app_dir, bootstrap,
                                                                 topic, defect):
    with pytest.raises(KsparkError) as caught:
        _run(spark, app_dir, bootstrap, topic, defect, None)
    first = str(caught.value).splitlines()[0]
    assert DEFECTS[defect][2] in first
    assert re.search(r"topic '\S+' partition 0 offset \d+", first), first


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_with_log_and_continue_a_bad_kafka_record_is_skipped_counted_and_dead_lettered(
        spark, app_dir, bootstrap, topic, defect):
    topics, app = _run(spark, app_dir, bootstrap, topic, defect, LOG)
    dead = topics["dead"].raw_records()
    metrics = app.metrics()
    if DEFECTS[defect][0] is S:
        out = topics["out"].records()
        assert sorted(k for k, _, _ in out) == ["big", "u0", "u1", "u2"]
        assert len(next(v for k, v, _ in out if k == "big")) == BIG
        assert metrics["dropped-records-deserialization-error"] == 1 == len(dead)
        assert dead[0][1] == b"{not json"
    else:  # every key is too short for a windowed key: both records are skipped
        assert topics["out"].records() == []
        assert metrics["dropped-records-deserialization-error"] == 2 == len(dead)
        assert {d[1] for d in dead} == {b'"x"', f'"{"x" * BIG}"'.encode()}
