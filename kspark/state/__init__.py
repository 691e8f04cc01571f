"""State stores: in-memory key-value, window and session stores with segments, retention,
caching and changelogs (docs/semantics.md §6), and the builders that make them."""

from kspark.state.builders import StoreBuilder, Stores
from kspark.state.internals.base import (
    DEFAULT_BUCKETS,
    BucketLoader,
    NullContext,
    StoreBase,
    StoreContext,
)
from kspark.state.internals.changelog import changelog_topic
from kspark.state.internals.persistence import DictBucketLoader
from kspark.state.key_value import InMemoryKeyValueStore
from kspark.state.session import InMemorySessionStore
from kspark.state.window import InMemoryWindowStore

__all__ = [
    "DEFAULT_BUCKETS",
    "BucketLoader",
    "DictBucketLoader",
    "InMemoryKeyValueStore",
    "InMemorySessionStore",
    "InMemoryWindowStore",
    "NullContext",
    "StoreBase",
    "StoreBuilder",
    "StoreContext",
    "Stores",
    "changelog_topic",
]
