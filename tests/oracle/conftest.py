"""The Kafka Streams oracle, built once per test run and served by one JVM for all tests."""

from __future__ import annotations

import pytest

from oracle import Oracle, jar_path


@pytest.fixture(scope="session")
def oracle_jar():
    """The oracle jar: ``mvn -q -B package`` on first use, then cached (see ``oracle.py``)."""
    return jar_path()


@pytest.fixture(scope="session")
def kafka_streams(oracle_jar):
    """One JVM in batch mode for the whole run."""
    with Oracle(oracle_jar) as oracle:
        yield oracle
