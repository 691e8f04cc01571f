"""Stores and StoreBuilder."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kspark.state import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    StoreBuilder,
    Stores,
)


def test_key_value_store_builder() -> None:
    serde = object()
    builder = Stores.key_value_store("counts", key_serde=serde)
    assert (builder.name, builder.kind, builder.caching, builder.logging) == (
        "counts",
        "key_value",
        False,
        True,
    )
    assert builder.key_serde is serde and builder.value_serde is None
    a, b = builder.build(), builder.build(num_buckets=3)
    assert isinstance(a, InMemoryKeyValueStore) and a is not b
    assert (a.num_buckets, b.num_buckets) == (16, 3)
    a.put("k", 1)
    assert b.get("k") is None


def test_window_store_builder_with_durations() -> None:
    builder = Stores.window_store(
        "w", timedelta(minutes=10), timedelta(seconds=30), retain_duplicates=True
    )
    store = builder.build()
    assert isinstance(store, InMemoryWindowStore)
    assert (store.retention_ms, store.window_size_ms, store.retain_duplicates) == (
        600_000,
        30_000,
        True,
    )
    assert store.segment_interval_ms == 300_000
    assert builder.params["window_size_ms"] == 30_000


def test_session_store_builder_and_toggles() -> None:
    builder = Stores.session_store("s", 5000, caching=True, logging=False)
    assert builder.with_caching_disabled() is builder
    assert builder.with_logging_enabled() is builder
    store = builder.build()
    assert isinstance(store, InMemorySessionStore)
    assert (store.caching, store.logging, store.retention_ms) == (False, True, 5000)
    builder.with_caching_enabled().with_logging_disabled()
    store = builder.build()
    assert (store.caching, store.logging) == (True, False)
    assert store.name == "s"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Stores.key_value_store(""),
        lambda: Stores.window_store("w", 10, 20),
        lambda: Stores.window_store("w", -1, 1),
        lambda: Stores.window_store("w", 10, -5),
        lambda: Stores.window_store("w", 10, 5, retain_duplicates=True, caching=True),
        lambda: Stores.session_store("s", -1),
        lambda: Stores.session_store("", 10),
        lambda: StoreBuilder("x", "nope"),
    ],
)
def test_invalid_arguments_raise_at_builder_creation(make) -> None:
    with pytest.raises(ValueError):
        make()


def test_a_window_store_of_size_zero_is_allowed() -> None:
    """As Kafka Streams allows it: a stream-stream join with a time difference of 0 keeps its
    records in window stores of size 0."""
    store = Stores.window_store("w", 0, 0, retain_duplicates=True).build()
    assert store.window_size_ms == 0 and store.retention_ms == 0


def test_caching_with_duplicates_rejected_on_toggle() -> None:
    builder = Stores.window_store("w", 10, 5, retain_duplicates=True)
    with pytest.raises(ValueError, match="retain_duplicates"):
        builder.with_caching_enabled()
    assert builder.build().caching is False


def test_bad_duration_type() -> None:
    with pytest.raises(TypeError):
        Stores.session_store("s", "10s")  # type: ignore[arg-type]
