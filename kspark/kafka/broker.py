"""The embedded broker: Apache Kafka itself, one KRaft node on loopback, for development and tests.

It runs Apache Kafka's own server (``org.apache.kafka:kafka_2.13``, fetched from Maven Central on
first use and cached, see :mod:`kspark.maven`) in a JVM of its own: one node that is both broker
and controller (KRaft, no ZooKeeper), its data in a temporary directory that is removed at stop,
or in ``data_dir`` where it survives. Internal topics (offsets, transactions) have one replica,
so Kafka transactions and consumer groups work as on a cluster. Topics keep their records
forever unless they set ``retention.ms`` themselves (Kafka's default is 7 days by record
timestamp).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import IO

from kspark.errors import KsparkError
from kspark.maven import resolve

#: the Apache Kafka release the embedded broker runs
KAFKA_VERSION = "4.3.1"
#: its artifacts: the server, and a binding that sends its logging to log4j 2
BROKER_ARTIFACTS = (
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4",
)
#: the JVM's options: a small heap, and the client compiler only (it starts faster and leaves
#: the cores to the work under test)
JVM_OPTIONS = ("-Xms128m", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.awt.headless=true")

_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
logger.info.name = org.apache.kafka.common.utils.AppInfoParser
logger.info.level = INFO
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
"""


class BrokerError(KsparkError):
    """The embedded broker could not be fetched, started or reached, or it died."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def broker_classpath() -> str:
    """The embedded broker's class path (fetched from Maven Central on first use)."""
    return os.pathsep.join(resolve(BROKER_ARTIFACTS, f"kafka-{KAFKA_VERSION}"))


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
    """Apache Kafka on ``host:port`` (a free port if none is given), one KRaft node.

    ``data_dir``: where the broker keeps its logs; a temporary directory, removed at stop, if
    none is given. ``config``: server properties added to (or overriding) the defaults, e.g.
    ``{"log.cleaner.backoff.ms": "500"}``. Use it as a context manager, or call :meth:`start`
    and :meth:`stop`::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        data_dir: str | None = None,
        log_path: str | None = None,
        config: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.data_dir = data_dir
        self.log_path = log_path
        self.config = dict(config or {})
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._workdir: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def server_properties(self, log_dir: str, controller_port: int) -> dict[str, str]:
        """The node's server properties: defaults for one node, then :attr:`config`."""
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{controller_port}",
            "listeners": f"{listener},CONTROLLER://{self.host}:{controller_port}",
            "advertised.listeners": listener,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": log_dir,
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # records are kept until their topic's own retention deletes them: generated data
            # with old timestamps would otherwise vanish at the broker's first retention check
            "log.retention.ms": "-1",
        }
        props.update({k: str(v) for k, v in self.config.items()})
        return props

    def start(self) -> EmbeddedBroker:
        """Start the broker (fetching Kafka first if it is not cached) and wait until it
        answers a metadata request."""
        if self.running:
            return self
        classpath = broker_classpath()
        java = shutil.which("java")
        if java is None:
            raise BrokerError("Java 17 is required to run the embedded Apache Kafka broker")
        conf_dir = self._workdir = tempfile.mkdtemp(prefix="kspark-kafka-")
        log_dir = os.path.abspath(self.data_dir or os.path.join(conf_dir, "data"))
        os.makedirs(log_dir, exist_ok=True)
        if self.log_path is None:
            self.log_path = os.path.join(conf_dir, "broker.log")
        props_path = os.path.join(conf_dir, "server.properties")
        props = self.server_properties(log_dir, free_port(self.host))
        with open(props_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        log4j = os.path.join(conf_dir, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write(_LOG4J)
        jvm = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        if not os.path.exists(os.path.join(log_dir, "meta.properties")):
            self._format(jvm, props_path)
        self._proc = subprocess.Popen(
            [*jvm, "kafka.Kafka", props_path],
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

    def _format(self, jvm: list[str], props_path: str) -> None:
        """Format the node's log directory (KRaft needs a cluster id before it starts)."""
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        done = subprocess.run(
            [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", props_path],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, check=False,
        )
        if done.returncode != 0:
            raise BrokerError(
                f"formatting the Kafka broker's storage failed (exit {done.returncode}); log: "
                f"{self.log_path}\n{self.log_tail()}"
            )

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        admin = None
        while True:
            self.check()
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
                # a client made before the port listens would log its refused connections
                admin = admin or AdminClient({"bootstrap.servers": self.bootstrap_servers})
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise BrokerError(
                        f"Kafka broker on {self.bootstrap_servers} not ready within "
                        f"{self.startup_timeout} s ({exc}); log: {self.log_path}\n"
                        f"{self.log_tail()}"
                    ) from exc
            time.sleep(0.1)

    def check(self) -> None:
        """Raise :class:`BrokerError` with the end of the broker's log if it has exited."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            raise BrokerError(
                f"Kafka broker on {self.bootstrap_servers} exited with code {proc.returncode}; "
                f"log: {self.log_path}\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the broker's log."""
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, "rb") as f:
            return b"".join(f.readlines()[-lines:]).decode("utf-8", "replace")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker: SIGTERM (a controlled shutdown), then SIGKILL after ``timeout``
        seconds. A temporary data directory is removed; the log is kept."""
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
        if self._workdir is not None and self.data_dir is None:
            shutil.rmtree(os.path.join(self._workdir, "data"), ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
