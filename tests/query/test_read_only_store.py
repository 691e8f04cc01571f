"""Read-only source stores in the test driver (docs/semantics.md §7) and read-only query views."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from query_topologies import (
    COUNTS,
    DAY,
    SESSIONS,
    TOTALS,
    counter_topology,
    driver_stores,
    encoded_changelog,
    events,
    reader_topology,
)

from kspark import (
    InvalidStateStoreError,
    KeyValue,
    Processor,
    Stores,
    Topology,
    TopologyError,
    TopologyTestDriver,
    Window,
    Windowed,
    serdes,
)
from kspark.errors import SerializationError
from kspark.serdes import String
from kspark.state.internals.changelog import ChangelogCodec, ChangelogKeySerde, changelog_topic
from kspark.state.views import read_only_view

TOPIC = changelog_topic("app-a", COUNTS)


def _restore_into_b(topology_b: Topology, records: list[tuple]) -> TopologyTestDriver:
    driver = TopologyTestDriver(topology_b)
    for key, value, ts in records:
        driver.pipe_raw(TOPIC, key, value, ts)
    return driver


def test_b_restores_a_window_store_from_its_changelog():
    a = counter_topology()
    stores, changelogs = driver_stores(a, events(300))
    assert len(stores[COUNTS]) > 20
    with _restore_into_b(reader_topology(), encoded_changelog(a, COUNTS, changelogs[COUNTS])) as b:
        store = b.get_window_store(COUNTS)
        assert store.all() == stores[COUNTS]
        assert store.read_only
        # B keeps no changelog of the reused store
        assert b.changelogs == {}


def test_b_answers_from_a_store_and_cannot_write_it():
    a = counter_topology()
    records = events(300)
    stores, changelogs = driver_stores(a, records)
    with _restore_into_b(reader_topology(), encoded_changelog(a, COUNTS, changelogs[COUNTS])) as b:
        ask = b.create_input_topic("questions", serdes.String(), serdes.Json())
        answers = b.create_output_topic("answers", serdes.String(), serdes.Json())
        last = records[-1][2]
        ask.pipe_input("user-1|a", {}, last)
        day = last - last % DAY
        expected = [
            [kv.key.window.start, kv.value]
            for kv in stores[COUNTS]
            if kv.key.key == "user-1|a" and day - 6 * DAY <= kv.key.window.start <= day
        ]
        assert expected
        assert answers.read_value() == expected
        with pytest.raises(InvalidStateStoreError, match="read-only"):
            b.get_window_store(COUNTS).put("user-1|a", 5, 0)


def test_writing_processor_fails_with_the_record_coordinates():
    class Writer(Processor):
        def init(self, context):
            self.store = context.get_state_store(COUNTS)

        def process(self, record):
            self.store.put(record.key, 1, 0)

    topo = Topology()
    topo.add_source("in", "in", serdes.String(), serdes.Json())
    topo.add_processor("writer", Writer, "in")
    topo.add_read_only_state_store(Stores.window_store(COUNTS, 30 * DAY, DAY), TOPIC, "writer")
    with TopologyTestDriver(topo) as driver, pytest.raises(Exception, match="read-only"):
        driver.create_input_topic("in", serdes.String(), serdes.Json()).pipe_input("k", 1, 5)


@pytest.mark.parametrize("store", [TOTALS, SESSIONS])
def test_key_value_and_session_stores_restore_too(store):
    a = counter_topology()
    stores, changelogs = driver_stores(a, events(200))
    builder = a.store_builders[store]
    topic = changelog_topic("app-a", store)
    b = Topology()
    if builder.kind == "session":
        b.add_read_only_state_store(Stores.session_store(
            store, builder.params["retention_ms"], key_serde=builder.key_serde,
            value_serde=builder.value_serde), topic)
    else:
        b.add_read_only_state_store(Stores.key_value_store(
            store, key_serde=builder.key_serde, value_serde=builder.value_serde), topic)
    with TopologyTestDriver(b) as driver:
        for k, v, ts in encoded_changelog(a, store, changelogs[store]):
            driver.pipe_raw(topic, k, v, ts)
        assert driver.get_state_store(store).all() == stores[store]


def test_tombstones_delete_and_retention_follows_a():
    builder = Stores.window_store(COUNTS, 2 * DAY, DAY)
    topo = Topology().add_read_only_state_store(builder, TOPIC)
    codec = ChangelogCodec.for_builder(builder)
    with TopologyTestDriver(topo) as driver:
        def put(key, start, value):
            windowed = Windowed(key, Window(start, start + DAY))
            driver.pipe_raw(TOPIC, codec.encode_key(windowed), codec.encode_value(value), start)

        put("k", 0, 1)
        put("j", 0, 2)
        put("k", 0, None)
        assert driver.get_window_store(COUNTS).all() == [KeyValue(Windowed("j", Window(0, DAY)), 2)]
        put("k", 5 * DAY, 3)  # window 0 expires with A's retention of 2 days
        assert [kv.key.key for kv in driver.get_window_store(COUNTS).all()] == ["k"]


def test_read_only_store_turns_logging_and_caching_off_and_is_registered():
    builder = Stores.window_store(COUNTS, 30 * DAY, DAY, caching=True, logging=True)
    topo = Topology().add_read_only_state_store(builder, TOPIC)
    assert (builder.logging, builder.caching) == (False, False)
    assert topo.source_stores == {COUNTS: TOPIC}
    assert TOPIC in topo.external_source_topics()
    assert "Source: event-counts-changelog-source (topics: [app-a-event-counts-changelog])" in str(
        topo.describe()
    )


def test_read_only_store_errors():
    topo = Topology()
    topo.add_source("in", "in")
    topo.add_processor("p", Processor, "in")
    topo.add_sink("out", "mine", "p")
    with pytest.raises(TopologyError, match="written by this topology"):
        topo.add_read_only_state_store(Stores.key_value_store("s"), "mine")
    with pytest.raises(TopologyError, match="not in the topology"):
        topo.add_read_only_state_store(Stores.key_value_store("s"), "other", "nope")
    topo.add_read_only_state_store(Stores.key_value_store("s"), "other", "p")
    with pytest.raises(TopologyError, match="already added"):
        topo.add_read_only_state_store(Stores.key_value_store("s"), "other2")
    topo.add_sink("out2", "other", "p")
    with pytest.raises(TopologyError, match="written by this topology"):
        topo.validate()


def test_dsl_builder_connects_a_read_only_store_by_name():
    from kspark import StreamsBuilder

    class Lookup(Processor):
        def init(self, context):
            self.context = context
            self.store = context.get_state_store("totals")

        def process(self, record):
            self.context.forward(record.with_value(self.store.get(record.key)))

    b = StreamsBuilder()
    b.add_read_only_state_store(Stores.key_value_store("totals"), changelog_topic("a", "totals"))
    b.stream("q", serdes.String(), serdes.String()).process(Lookup, "totals").to(
        "out", key_serde=serdes.String(), value_serde=serdes.Json()
    )
    with TopologyTestDriver(b.build()) as driver:
        codec = ChangelogCodec("key_value")
        driver.pipe_raw(changelog_topic("a", "totals"), codec.encode_key("u"),
                        codec.encode_value(7), 1)
        driver.create_input_topic("q", serdes.String(), serdes.String()).pipe_input("u", "?", 2)
        assert driver.create_output_topic("out", serdes.String(), serdes.Json()).read_value() == 7


# -- views -----------------------------------------------------------------------------------
def _split(kind_builder, entries, tasks=3):
    """One store holding every entry, and ``tasks`` stores holding disjoint keys."""
    whole = kind_builder.build(num_buckets=4)
    parts = [kind_builder.build(num_buckets=4) for _ in range(tasks)]
    whole.restore(entries)
    for i, part in enumerate(parts):
        part.restore([e for e in entries if hash(_key_of(e[0])) % tasks == i])
    return whole, parts


def _key_of(store_key):
    return store_key.key if isinstance(store_key, Windowed) else store_key


def test_views_merge_tasks_in_store_order():
    a = counter_topology()
    _, changelogs = driver_stores(a, events(300))
    for name in (COUNTS, TOTALS, SESSIONS):
        builder = a.store_builders[name]
        whole, parts = _split(builder, changelogs[name])
        view = read_only_view(name, builder.kind, parts)
        assert view.all() == whole.all()
        assert view.backward_all() == whole.backward_all() if builder.kind != "key_value" else (
            view.reverse_all() == whole.reverse_all())
        if builder.kind == "window":
            assert view.fetch_all(2 * DAY, 5 * DAY) == whole.fetch_all(2 * DAY, 5 * DAY)
            assert view.fetch_range("user-2|b", 0, 9 * DAY) == whole.fetch_range(
                "user-2|b", 0, 9 * DAY)
            assert view.fetch("user-2|b", 3 * DAY) == whole.fetch("user-2|b", 3 * DAY)
            assert view.fetch_key_range("user-1", "user-3", None, None) == whole.fetch_key_range(
                "user-1", "user-3", None, None)
        elif builder.kind == "session":
            assert view.find_sessions("user-3", 0, 10 * DAY) == whole.find_sessions(
                "user-3", 0, 10 * DAY)
            assert view.fetch("user-4") == whole.fetch("user-4")
            assert view.find_sessions_range(None, None, DAY, 4 * DAY) == (
                whole.find_sessions_range(None, None, DAY, 4 * DAY))
        else:
            assert view.get("user-2") == whole.get("user-2") is not None
            assert view.range("user-1", "user-3") == whole.range("user-1", "user-3")
            assert view.approximate_num_entries() == whole.approximate_num_entries()


def test_views_are_read_only_and_reject_empty_time_ranges():
    builder = Stores.window_store(COUNTS, 30 * DAY, DAY)
    view = read_only_view(COUNTS, "window", [builder.build()])
    for call in (lambda: view.put("k", 1, 0), lambda: view.delete("k")):
        with pytest.raises(InvalidStateStoreError, match="read-only"):
            call()
    with pytest.raises(ValueError, match=r"from \(10\) is after to \(5\)"):
        view.fetch_all(10, 5)
    with pytest.raises(ValueError, match=r"from \(10\) is after to \(5\)"):
        view.fetch_range("k", 10, 5)
    assert view.fetch_all(5, 5) == []


_KEY_BYTES = st.one_of(
    st.text(max_size=8).map(str.encode),
    st.binary(max_size=20),  # not UTF-8 text, or shorter than a window's 12 bytes
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.text(max_size=8), st.integers(0, 2**40)).map(
        lambda kw: kw[0].encode() + struct.pack(">qi", kw[1], 0)),
    _KEY_BYTES,
), min_size=1, max_size=12))
def test_changelog_keys_decode_in_bulk_as_one_by_one(keys):
    """A restoring task decodes a window store's changelog keys in bulk, as store keys or as
    columns: the same keys and windows, or, when some key does not fit the store's layout,
    the same error naming it."""
    codec = ChangelogCodec("window", String(), None, 60_000)
    serde = ChangelogKeySerde(codec)
    columns = codec.decode_window_columns(keys)
    try:
        expected = [serde.deserialize(k) for k in keys]
    except SerializationError as exc:
        with pytest.raises(SerializationError) as caught:
            serde.deserialize_all(keys)
        assert str(caught.value) == str(exc)
        assert columns is None  # the batch is then decoded the usual way, which names it
    else:
        assert serde.deserialize_all(keys) == expected
        # as columns (a restoring task's bulk path): each key and window start
        assert columns is not None
        assert list(zip(columns[0], columns[1].tolist())) == [
            (w.key, w.window.start) for w in expected
        ]
