"""The embedded broker, one per test run, on a free loopback port."""

from __future__ import annotations

import itertools

import pytest

from kspark.kafka import EmbeddedBroker

_names = itertools.count()


@pytest.fixture(scope="session")
def broker():
    # the log cleaner looks for work every 0.5 s (not 15 s), so compaction tests wait less
    with EmbeddedBroker(config={"log.cleaner.backoff.ms": "500"}) as running:
        yield running


@pytest.fixture
def bootstrap(broker) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def topic(request) -> str:
    """A topic name of this test's own (the broker is shared by the whole run)."""
    return f"{request.node.name.replace('[', '-').replace(']', '')[:60]}-{next(_names)}"
