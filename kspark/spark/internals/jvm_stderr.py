"""What the JVM of a classic Spark session writes to its standard error, relayed to this
process's standard error without the banner lines pyspark's stateful Python worker prints on
each query start (``Streaming TransformWithStateInPandas Python worker ...``, each followed by an
empty line). A JVM kspark starts for a local session is started with its standard error piped
here (:func:`launch_gateway_quietly`); a JVM started otherwise (``spark-submit``, a session made
before kspark's) gets its ``System.err`` pointed at a pipe of this process
(:func:`relay_system_err`), where Spark copies its Python workers' output."""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from typing import IO, Any

#: what each banner line of pyspark's ``transform_with_state_driver_worker`` contains
BANNER = b"Streaming TransformWithStateInPandas Python worker"


def relay(stream: IO[bytes], fd: int = 2) -> None:
    """Copy ``stream``'s lines to ``fd`` until it ends, without banner lines and the empty
    line after each."""
    after_banner = False
    for line in iter(stream.readline, b""):
        if BANNER in line:
            after_banner = True
            continue
        if after_banner and not line.strip():
            after_banner = False
            continue
        after_banner = False
        with contextlib.suppress(OSError):  # closed: keep draining, the JVM must not block
            os.write(fd, line)


def launch_gateway_quietly(settings: Mapping[str, str]) -> bool:
    """Start the JVM of the next Spark session with ``settings``, its standard error relayed
    through :func:`relay`; False (nothing done) when a JVM is already running or pyspark was
    started by ``spark-submit``."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    _RELAYED.add(id(gateway))
    threading.Thread(target=relay, args=(gateway.proc.stderr,), daemon=True,
                     name="kspark-jvm-stderr").start()
    with SparkContext._lock:
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    return True


#: the py4j gateways (by id) whose JVM's standard error this process relays
_RELAYED: set[int] = set()


def relay_system_err(gateway: Any) -> bool:
    """Point ``System.err`` of the JVM behind ``gateway`` at a named pipe whose lines this
    process relays through :func:`relay` (and point it back as this process exits); False
    (nothing done) when its standard error is relayed already or a named pipe cannot be made.
    Log4j's console output keeps the stream it had."""
    if id(gateway) in _RELAYED or not hasattr(os, "mkfifo"):
        return False
    jvm = gateway.jvm
    directory = tempfile.mkdtemp(prefix="kspark-stderr-")
    path = os.path.join(directory, "jvm-stderr")
    try:
        os.mkfifo(path, 0o600)
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # so that the JVM's open returns
        stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(path), True)
        os.set_blocking(reader, True)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.rmdir(directory)
    original = jvm.java.lang.System.err
    jvm.java.lang.System.setErr(stream)
    _RELAYED.add(id(gateway))
    threading.Thread(target=relay, args=(os.fdopen(reader, "rb"),), daemon=True,
                     name="kspark-jvm-system-err").start()

    def restore() -> None:
        with contextlib.suppress(Exception):  # the JVM may be gone already
            jvm.java.lang.System.setErr(original)
            stream.close()

    atexit.register(restore)
    return True


#: the logger of Spark's state server for stateful Python queries: it warns of every absent key
#: a batch looks up, which kspark does by design (Spark's default console shows WARN)
STATE_SERVER_LOGGER = ("org.apache.spark.sql.execution.python.streaming."
                       "TransformWithStateInPySparkStateServer")


def quiet_jvm_console(gateway: Any) -> None:
    """The console of a JVM kspark runs a query on, without pyspark's worker banners
    (:func:`relay_system_err`) and the state server's warnings of absent keys (its level set to
    ERROR); the rest of the JVM's logging as it was."""
    relay_system_err(gateway)
    jvm = gateway.jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        STATE_SERVER_LOGGER, jvm.org.apache.logging.log4j.Level.ERROR)
