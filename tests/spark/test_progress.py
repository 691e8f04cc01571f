"""Reading a micro-batch's progress (the source entries as Spark reports them): which source is
the tick source, and when a source has caught up."""

from __future__ import annotations

from kspark.spark.internals.progress import _caught_up, _is_tick_source, source_lag

SOURCE = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@1"


def entry(end: str, latest: str = "null", rows: int = 0) -> dict:
    return {"description": SOURCE, "endOffset": end, "latestOffset": latest,
            "numInputRows": rows}


def test_the_tick_source_is_known_by_its_offsets_not_a_topic_named_like_them():
    assert _is_tick_source(entry('{"tick": 3591213249}', rows=1))
    assert not _is_tick_source(entry('{"tick": {"0": 5}}', '{"tick": {"0": 5}}'))
    assert not _is_tick_source(entry('{"files": 4}'))


def test_a_source_without_a_latest_offset_caught_up_once_a_batch_read_nothing():
    assert not _caught_up(entry('{"files": 2}', rows=1))
    assert _caught_up(entry('{"files": 4}', rows=0))


def test_a_source_with_a_latest_offset_caught_up_at_it():
    behind = entry('{"clicks": {"0": 5}}', '{"clicks": {"0": 9}}', rows=5)
    assert not _caught_up(behind)
    assert source_lag({"sources": [behind]}) == 4
    assert _caught_up(entry('{"clicks": {"0": 9}}', '{"clicks": {"0": 9}}', rows=4))


def test_kafka_range_rows_carry_their_latest_offsets_in_the_end_offset():
    # Spark asks the range rows' simple reader for no latest offset (null in the progress)
    behind = entry('{"clicks": {"0": 5, "1": 2}, "@skipped": 3, '
                   '"@latest": {"clicks": {"0": 9, "1": 2}}}', rows=2)
    assert not _caught_up(behind)
    assert source_lag({"sources": [behind]}) == 4
    done = entry('{"clicks": {"0": 9, "1": 2}, "@skipped": 3, '
                 '"@latest": {"clicks": {"0": 9, "1": 2}}}', rows=2)
    assert _caught_up(done)
    assert source_lag({"sources": [done]}) == 0
