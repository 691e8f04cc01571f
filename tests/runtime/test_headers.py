"""Record headers in a task's batch (what a Spark task runs): kept on the record-by-record
path a batch with headers takes, and carried by aggregations as Kafka Streams carries them: a
result has the headers of the record that wrote it, with caching on those of the key's last
write before the commit (its cache keeps each entry's record context,
``CachingKeyValueStore.putInternal``, and forwards with it at flush)."""

from __future__ import annotations

from kspark import Materialized, StreamsBuilder, serdes
from kspark.config import StreamsConfig
from kspark.records import decode_headers, encode_headers
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.serialized import SourceBatch, output_headers
from kspark.runtime.task import SourceRecord

S, L = serdes.String(), serdes.Long()


def test_headers_round_trip_through_their_bytes():
    for headers in [(), (("a", b"1"),), (("d", b"1"), ("d", b"2"), ("n", None), ("e", b"")),
                    (("ünï", b"\x00\xff"),)]:
        assert decode_headers(encode_headers(headers)) == headers


def _count(caching: bool):
    b = StreamsBuilder()
    (b.stream("in", S, S).group_by_key()
     .count(Materialized("counts", caching=caching)).to_stream().to("out", S, L))
    return b.build()


def _records() -> list[SourceRecord]:
    rows = [("a", (("h", b"1"),)), ("b", ()), ("a", (("h", b"2"), ("h", None))), ("b", ()),
            ("c", (("h", b"3"),)), ("c", ()), ("b", (("x", b""),))]
    return [SourceRecord("in", 0, i, 100 + i, k.encode(), b"v", h)
            for i, (k, h) in enumerate(rows)]


def _run(caching: bool, batch: bool) -> list[tuple]:
    topology = _count(caching)
    sub = topology.sub_topologies()[0]
    records = _records()
    result = run_task_batch(topology, sub, 0, SourceBatch.from_records(records) if batch
                            else records, DictTaskState(),
                            StreamsConfig.of({}, application_id="headers"))
    return [(r.key, L.deserialize(r.value), r.timestamp, r.headers) for r in result.output]


def test_a_cached_aggregation_forwards_each_keys_last_writers_headers():
    # one result per key at the commit, with the headers of its last record
    assert _run(caching=True, batch=False) == [
        (b"a", 2, 102, (("h", b"2"), ("h", None))),
        (b"c", 2, 105, ()),
        (b"b", 3, 106, (("x", b""),)),
    ]


def test_an_uncached_aggregation_forwards_each_records_headers():
    assert [(k, n, h) for k, n, _, h in _run(caching=False, batch=False)] == [
        (b"a", 1, (("h", b"1"),)), (b"b", 1, ()), (b"a", 2, (("h", b"2"), ("h", None))),
        (b"b", 2, ()), (b"c", 1, (("h", b"3"),)), (b"c", 2, ()), (b"b", 3, (("x", b""),)),
    ]


def test_a_batch_with_headers_gives_what_its_records_give():
    for caching in (True, False):
        assert _run(caching, batch=True) == _run(caching, batch=False)
    batch = SourceBatch.from_records(_records())
    assert [r.headers for r in batch.records()] == [r.headers for r in _records()]
    plain = SourceBatch.from_records([SourceRecord("in", 0, 0, 1, b"k", b"v")])
    assert plain.headers is None and plain.record(0).headers == ()


def test_output_headers_are_none_without_any():
    topology = _count(caching=False)
    records = [SourceRecord("in", 0, i, i, b"k", b"v") for i in range(5)]
    result = run_task_batch(topology, topology.sub_topologies()[0], 0,
                            SourceBatch.from_records(records), DictTaskState(),
                            StreamsConfig.of({}, application_id="headers"))
    assert len(result.output) == 5 and output_headers(result.parts) is None
