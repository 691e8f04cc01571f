"""A Spark Connect server for the tests, started from pyspark's own distribution
(``sbin/start-connect-server.sh --wait``) on a free loopback port with kspark's settings, its
Python workers this interpreter with kspark importable."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
from net_util import free_port

from kspark.spark.session import kspark_spark_conf, prepare_python_env


class ConnectServer:
    """The running server; :attr:`url` is the ``sc://`` address clients connect to."""

    def __init__(self, log_dir: str, timeout: float = 180.0) -> None:
        prepare_python_env()
        home = Path(pyspark.__file__).parent
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        settings = {**kspark_spark_conf(), "spark.connect.grpc.binding.port": str(self.port),
                    "spark.connect.grpc.binding.address": "127.0.0.1"}
        conf = [arg for k, v in settings.items() for arg in ("--conf", f"{k}={v}")]
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": log_dir,
               "SPARK_PID_DIR": log_dir, "PYSPARK_PYTHON": sys.executable}
        self._log = open(os.path.join(log_dir, "connect.log"), "ab")  # noqa: SIM115
        self._proc = subprocess.Popen(
            ["bash", str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master",
             "local[2]", *conf], env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the Spark Connect server did not start; its log: "
                                   f"{log_dir}/connect.log")
            time.sleep(0.5)

    def _listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def close(self) -> None:
        try:
            os.killpg(self._proc.pid, 15)
            self._proc.wait(60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self._proc.pid, 9)
        self._log.close()
