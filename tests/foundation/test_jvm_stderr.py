"""The local JVM's standard error relayed without pyspark's stateful worker banners
(kspark.spark.internals.jvm_stderr): every other line passes, in order, blank ones included."""

from __future__ import annotations

import io
import os

from kspark.spark.internals.jvm_stderr import relay

LINES = [
    b"WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address\n",
    b"Starting Streaming TransformWithStateInPandas Python worker.\n", b"\n",
    b"Streaming TransformWithStateInPandas Python worker finish init stage of Python runner. "
    b"Received UDF from JVM: <bound method ...>\n", b"\n",
    b"\n",  # a blank line of the JVM's own, not a banner's
    b"ERROR Executor: Exception in task 0.0\n",
    b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF.\n", b"\n",
]


def test_relay_drops_the_banners_and_their_blank_lines_and_keeps_the_rest():
    read, write = os.pipe()
    try:
        relay(io.BytesIO(b"".join(LINES)), write)
        os.close(write)
        write = -1
        with os.fdopen(read, "rb") as out:
            read = -1
            relayed = out.read()
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)
    assert relayed == LINES[0] + b"\n" + LINES[6]
