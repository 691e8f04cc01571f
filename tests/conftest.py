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
    items.sort(key=_slow_layer)


#: test modules with work that starts when the run begins (``start_background(tmp)``,
#: ``stop_background()``, ``BACKGROUND``: the work, with ``.process``; ``EXCLUSIVE``: whether
#: the run's Spark, Kafka and packaging tests wait for it to end)
BACKGROUND_MODULES = ("test_wheel.py", "test_kafka_soak.py")
_STARTED: list = []


def pytest_collection_finish(session):
    """Start the long work of the collected modules in BACKGROUND_MODULES: the compiled
    wheel's build (one core) and the soak (a low steady load) run while the fast tests go on."""
    for item in session.items:
        module = getattr(item, "module", None)
        if item.fspath.basename not in BACKGROUND_MODULES or module in _STARTED:
            continue
        if module.__name__.endswith("test_wheel") and "wheel_build" not in item.fixturenames:
            continue  # the pure wheels' tests build their own
        tmp = Path(tempfile.mkdtemp(prefix="kspark-background-"))
        session.config.add_cleanup(partial(shutil.rmtree, tmp, ignore_errors=True))
        module.start_background(tmp)
        session.config.add_cleanup(module.stop_background)
        _STARTED.append(module)


def _slow_layer(item) -> bool:
    return any(os.sep + d + os.sep in str(item.fspath) for d in ("spark", "kafka", "packaging"))


def pytest_runtest_setup(item):
    """A Spark, Kafka or packaging test starts once exclusive background work has ended."""
    if _slow_layer(item):
        for module in _STARTED:
            if module.EXCLUSIVE:
                for work in module.BACKGROUND:
                    work.process.wait(timeout=900)
