"""A Spark standalone cluster for tests: a master and workers started from pyspark's own
distribution (``bin/spark-class``), each a JVM of its own with its own Python workers, on
loopback. No Docker, nothing outside the installed pyspark."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> str:
    import pyspark

    from kspark.spark.session import spark_home_without_zipped_python

    return spark_home_without_zipped_python() or os.path.dirname(pyspark.__file__)


def _wait_for(path: str, text: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            if text in f.read():
                return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    with open(path, errors="replace") as f:
        raise RuntimeError(f"no {text!r} in {path}:\n{f.read()[-3000:]}")


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """Start a master and ``workers`` workers; yield the master URL; stop them all."""
    home = _spark_home()
    spark_class = os.path.join(home, "bin", "spark-class")
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}
    logs = tempfile.mkdtemp(prefix="kspark-standalone-")
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, str]:
        log = os.path.join(logs, f"{name}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen([spark_class, *args], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc, log

    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    try:
        master, log = start("master", "org.apache.spark.deploy.master.Master", "--host",
                            "127.0.0.1", "--port", str(port), "--webui-port", "0")
        _wait_for(log, "I have been elected leader", master)
        for i in range(workers):
            worker, log = start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", url,
                                "--cores", str(cores), "--memory", memory, "--webui-port", "0",
                                "--work-dir", os.path.join(logs, f"work-{i}"))
            _wait_for(log, "Successfully registered with master", worker)
        yield url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
