"""The standard error of the JVM kspark starts for a local session, relayed to this process's
standard error without the banner lines pyspark's stateful Python worker prints on each query
start (``Streaming TransformWithStateInPandas Python worker ...``, each followed by an empty
line). A JVM started otherwise (``spark-submit``, a session made before kspark's) is left as
it is."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping
from typing import IO

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
    threading.Thread(target=relay, args=(gateway.proc.stderr,), daemon=True,
                     name="kspark-jvm-stderr").start()
    with SparkContext._lock:
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    return True
