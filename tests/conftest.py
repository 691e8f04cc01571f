"""Shared fixtures: one Spark session for the whole run (PySpark is slow to start), one
Schema Registry server, one Spark Connect server."""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark():
    from kspark.spark.session import local_spark

    session = local_spark("local[2]")
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
    """Run the Spark, Kafka and packaging tests last, so the fast layers fail fast."""
    slow = tuple(os.sep + d + os.sep for d in ("spark", "kafka", "packaging"))
    items.sort(key=lambda item: any(d in str(item.fspath) for d in slow))


def pytest_collection_finish(session):
    """Start the compiled wheel's build when a test of it is to run: it compiles on one core
    while the tests before it run on the other."""
    for item in session.items:
        if "wheel_build" in getattr(item, "fixturenames", ()):
            tmp = Path(tempfile.mkdtemp(prefix="kspark-wheel-"))
            session.config.add_cleanup(partial(shutil.rmtree, tmp, ignore_errors=True))
            item.module.start_wheel_build(tmp)
            session.config.add_cleanup(item.module.stop_wheel_build)
            return
