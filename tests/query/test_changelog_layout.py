"""Changelog records in Kafka Streams' layout (docs/semantics.md §7), as the test driver writes
them to a store's changelog topic, and read-only stores attached to a changelog whose bytes do
not fit their layout (docs/semantics.md §8): the error names the store, topic, partition and
offset. (``tests/oracle/test_byte_compat.py`` checks the layouts against Kafka Streams itself.)"""

from __future__ import annotations

import pytest

from kspark import (
    Materialized,
    SessionWindows,
    Stores,
    StreamsBuilder,
    StreamsError,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Window,
    Windowed,
    serdes,
)

TOPIC = "a-counts-changelog"


def _long(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def _int(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def test_the_driver_writes_changelog_topics_in_kafka_streams_layout() -> None:
    b = StreamsBuilder()
    b.stream("in", serdes.String(), serdes.Long()).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(10)).count(
        Materialized("counts", caching=False, key_serde=serdes.String(),
                     value_serde=serdes.Long()))
    with TopologyTestDriver(b.build(), config={"application.id": "a"}) as driver:
        driver.create_input_topic("in", serdes.String(), serdes.Long()).pipe_input("k", 1, 13)
        assert driver.changelog_topic("counts") == TOPIC
        log = driver.create_output_topic(TOPIC, serdes.Bytes(), serdes.Bytes())
        (record,) = log.read_records_to_list()
    assert (record.key, record.value, record.timestamp) == (b"k" + _long(10) + _int(0),
                                                            _long(1), 13)


def test_the_driver_keeps_windowed_changelog_entries_across_reads() -> None:
    """The driver keeps changelog entries flat between reads; each read gives every entry so
    far, with its ``Windowed`` key, in order, and the topic gives each entry once."""
    b = StreamsBuilder()
    b.stream("in", serdes.String(), serdes.Long()).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)).count(
        Materialized("counts", caching=False, key_serde=serdes.String(),
                     value_serde=serdes.Long()))
    with TopologyTestDriver(b.build(), config={"application.id": "a"}) as driver:
        pipe = driver.create_input_topic("in", serdes.String(), serdes.Long())
        log = driver.create_output_topic(TOPIC, serdes.Bytes(), serdes.Bytes())
        pipe.pipe_input("k", 1, 0)
        first = list(driver.changelogs["counts"])
        assert len(log.read_records_to_list()) == 1
        pipe.pipe_input("k", 1, 5)
        pipe.pipe_input("j", 1, 7)
        entries = driver.changelogs["counts"]
        topic = log.read_records_to_list()
    assert first == [(Windowed("k", Window(0, 0)), 1, 0)]
    assert entries == [
        (Windowed("k", Window(0, 0)), 1, 0),
        (Windowed("k", Window(0, 0)), None, 5),
        (Windowed("k", Window(0, 5)), 2, 5),
        (Windowed("j", Window(7, 7)), 1, 7),
    ]
    assert [(r.key[:1], r.value, r.timestamp) for r in topic] == [
        (b"k", None, 5), (b"k", _long(2), 5), (b"j", _long(1), 7)]


def test_a_long_run_keeps_every_changelog_entry_once_in_order() -> None:
    """Past the records after which the driver takes the tasks' entries (every 64 of a topic),
    each entry is kept once, in order, with its ``Windowed`` key."""
    b = StreamsBuilder()
    b.stream("in", serdes.String(), serdes.Long()).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)).count(
        Materialized("counts", caching=False, key_serde=serdes.String(),
                     value_serde=serdes.Long()))
    n = 200
    with TopologyTestDriver(b.build(), config={"application.id": "a"}) as driver:
        pipe = driver.create_input_topic("in", serdes.String(), serdes.Long())
        for i in range(n):  # each record a session of a key of its own
            pipe.pipe_input(f"k{i}", 1, i * 100)
        entries = driver.changelogs["counts"]
        topic = driver.create_output_topic(TOPIC, serdes.Bytes(), serdes.Bytes())
        records = topic.read_records_to_list()
    assert entries == [(Windowed(f"k{i}", Window(i * 100, i * 100)), 1, i * 100)
                       for i in range(n)]
    assert len(records) == n and records[-1].key.startswith(f"k{n - 1}".encode())


def _attach(store_builder, records, config=None) -> TopologyTestDriver:
    topology = Topology().add_read_only_state_store(store_builder, TOPIC)
    driver = TopologyTestDriver(topology, config=config)
    for key, value, ts in records:
        driver.pipe_raw(TOPIC, key, value, ts)
    return driver


def _window_store(**kwargs):
    return Stores.window_store("counts", 1000, 10, key_serde=serdes.String(),
                               value_serde=serdes.Long(), **kwargs)


def _session_store():
    return Stores.session_store("counts", 1000, key_serde=serdes.String(),
                                value_serde=serdes.Long())


WHERE = f"topic '{TOPIC}' partition 0 offset 1 "


@pytest.mark.parametrize(("store", "key", "message"), [
    # a window store's key: key bytes, start (8 bytes), sequence number (4 bytes)
    (_window_store, b"k" + _long(10), r"store 'counts' \(window store\): changelog key of 9 "
     r"bytes .* at least 12 bytes"),
    # a session changelog (key, end, start) attached as a window store
    (_window_store, b"k" + _long(15) + _long(10), r"store 'counts' \(window store\): .*ends in "
     r"sequence number 10, not 0"),
    # a window changelog with a one-byte key attached as a session store
    (_session_store, b"k" + _long(10) + _int(0), r"store 'counts' \(session store\): changelog "
     r"key of 13 bytes .* at least 16 bytes"),
    # a window Kafka Streams could not build: end before start, negative start
    (_session_store, b"k" + _long(5) + _long(10), r"the window \[10, 5\]"),
    (_window_store, b"k" + _long(-10) + _int(0), r"the window \[-10, 0\]"),
    # key bytes the store's key serde cannot read
    (_window_store, b"\xff" + _long(10) + _int(0), r"store 'counts' \(window store\): "
     r"changelog key: String serde"),
])
def test_a_changelog_that_does_not_fit_the_store_fails_naming_where(store, key, message) -> None:
    good = (b"k" + _long(0) + _int(0) if store is _window_store else b"k" + _long(0) + _long(0))
    with pytest.raises(StreamsError, match=WHERE + r".*" + message):
        _attach(store(), [(good, _long(1), 5), (key, _long(1), 5)])


def test_an_undecodable_changelog_value_names_the_store() -> None:
    with pytest.raises(StreamsError, match=r"offset 0 .*store 'counts' \(window store\): "
                                           r"changelog value: Long serde"):
        _attach(_window_store(), [(b"k" + _long(0) + _int(0), b"\x01\x02\x03", 5)])


def test_with_log_and_continue_a_record_that_does_not_fit_is_skipped_and_counted() -> None:
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    with _attach(_window_store(), [(b"k" + _long(0) + _int(0), _long(1), 5),
                                   (b"k" + _long(15) + _long(10), _long(7), 15)], config) as d:
        assert [(kv.key.key, kv.key.window.start, kv.value)
                for kv in d.get_window_store("counts").all()] == [("k", 0, 1)]
        assert d.metrics()["dropped-records-total"] == 1


def test_a_window_store_with_duplicates_takes_any_sequence_number() -> None:
    records = [(b"k" + _long(0) + _int(seq), _long(seq), 5) for seq in (0, 7)]
    with _attach(_window_store(retain_duplicates=True), records) as d:
        assert [kv.value for kv in d.get_window_store("counts").all()] == [0, 7]
