"""A Schema Registry server for the tests: Apicurio Registry 2.4.2 (its Confluent-compatible
API under ``/apis/ccompat/v7``, in-memory storage), built from ``schema-registry/`` with Maven
on first use and cached as the oracle is (``kspark.jvm.maven.build_jar``), run as one JVM on a free
loopback port for the whole test run."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from net_util import free_port

from kspark.jvm.maven import build_jar

SOURCES = Path(__file__).resolve().parents[1] / "schema-registry"
JAR_NAME = "kspark-schema-registry-1.0-runner.jar"
JVM_OPTIONS = ("-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")



class SchemaRegistryServer:
    """The running registry; :attr:`url` is the base its clients are given."""

    def __init__(self, log_path: str, timeout: float = 120.0) -> None:
        jar = build_jar(SOURCES, JAR_NAME, "schema-registry", settings="settings.xml",
                        with_dirs=("lib",))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/apis/ccompat/v7"
        env = {**os.environ, "QUARKUS_HTTP_HOST": "127.0.0.1", "HTTP_PORT": str(self.port)}
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(["java", *JVM_OPTIONS, "-jar", str(jar)], env=env,
                                      stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the schema registry did not start; its log: {log_path}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._log.close()
