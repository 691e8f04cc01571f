"""Shared fixtures: one Spark session for the whole run (PySpark is slow to start), one
Schema Registry server, one Spark Connect server; each per test process when ``./dev test``
spreads the run over two (pytest-xdist)."""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import pytest

#: the xdist worker this process is (``None``: the run is not spread over workers)
WORKER = os.environ.get("PYTEST_XDIST_WORKER")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The run's Spark session, its tables' default place a folder of the run's own (a test
    process beside it has its own)."""
    from kspark.spark.session import local_spark

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = local_spark("local[2]", {"spark.sql.warehouse.dir": str(warehouse)})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory):
    """The URL of a real Schema Registry server (Apicurio Registry) for the whole run."""
    from registry_server import SchemaRegistryServer

    server = SchemaRegistryServer(str(tmp_path_factory.mktemp("registry") / "registry.log"))
    yield server.url
    server.close()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server started from pyspark's distribution (``.url``: its address).
    Its clients run in processes of their own: pyspark builds Spark Connect's columns in a
    process that made a Connect session, and classic ones in this one."""
    from connect_server import ConnectServer

    server = ConnectServer(str(tmp_path_factory.mktemp("connect")))
    yield server
    server.close()


@pytest.fixture
def app_dir():
    path = tempfile.mkdtemp(prefix="kspark-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """In one process, run the Spark, Kafka and packaging tests last, so the fast layers fail
    fast. Spread over workers (``./dev test``: each takes the next test file as it gets done):
    the ``long`` tests' files first, then the slow layers, the other layers that start a JVM,
    and the light layers (pure Python, one core), which even out the workers' ends."""
    slow = tuple(os.sep + d + os.sep for d in ("spark", "kafka", "packaging"))
    light = tuple(os.sep + d + os.sep for d in ("dsl", "foundation", "runtime", "state"))

    def in_layers(item, layers: tuple[str, ...]) -> bool:
        return any(d in str(item.fspath) for d in layers)

    if WORKER is None:
        items.sort(key=lambda item: in_layers(item, slow))
        return

    first = {str(item.fspath) for item in items if item.get_closest_marker("long")}

    def rank(item) -> int:
        if str(item.fspath) in first:
            return 0
        return 1 if in_layers(item, slow) else 3 if in_layers(item, light) else 2

    items.sort(key=rank)


def pytest_collection_finish(session):
    """Start the compiled wheel's build when a test of it is to run: it compiles on one core
    while the tests before it run on the other (in one process; spread over workers, the
    other worker's tests do)."""
    if WORKER is not None:
        return
    for item in session.items:
        if "wheel_build" in getattr(item, "fixturenames", ()):
            tmp = Path(tempfile.mkdtemp(prefix="kspark-wheel-"))
            session.config.add_cleanup(partial(shutil.rmtree, tmp, ignore_errors=True))
            item.module.start_wheel_build(tmp)
            session.config.add_cleanup(item.module.stop_wheel_build)
            return
