"""The embedded broker: Apache Kafka itself, one KRaft node on loopback, for development and tests.

It runs Apache Kafka's own server (``org.apache.kafka:kafka_2.13``, fetched from Maven Central on
first use and cached, see :mod:`kspark.maven`) in a JVM of its own: one node that is both broker
and controller (KRaft, no ZooKeeper), its data in a temporary directory that is removed at stop,
or in ``data_dir`` where it survives. Internal topics (offsets, transactions) have one replica,
so Kafka transactions and consumer groups work as on a cluster. Topics keep their records
forever unless they set ``retention.ms`` themselves (Kafka's default is 7 days by record
timestamp).

With ``sasl_users`` every listener authenticates with SASL/PLAIN (``SASL_PLAINTEXT``): the client
listener, which is also the inter-broker listener, and the controller listener. The broker
itself logs in on both as an internal user with a random password of its own; the users and
passwords live in each listener's ``listener.name.<name>.plain.sasl.jaas.config`` (no JAAS file).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
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


#: the user the broker logs in as on its own listeners (inter-broker and controller traffic)
INTERNAL_USER = "kspark-broker"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
#: user names the broker's JAAS options (``user_<name>="password"``) can carry
_USER_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class BrokerError(KsparkError):
    """The embedded broker could not be fetched, started or reached, or it died."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def jaas_quote(value: str) -> str:
    """``value`` as a quoted string of a JAAS configuration."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plain_jaas_config(username: str, password: str, users: dict[str, str] | None = None) -> str:
    """A ``sasl.jaas.config`` of the PLAIN login module: the login of ``username`` and, for a
    broker's listener, the users it accepts with their passwords."""
    options = [f"username={jaas_quote(username)}", f"password={jaas_quote(password)}"]
    options += [f"user_{name}={jaas_quote(pw)}" for name, pw in (users or {}).items()]
    return f"{_PLAIN_MODULE} required {' '.join(options)};"


def _property_line(key: str, value: str) -> str:
    """``key=value`` for a Java properties file (backslashes and line breaks escaped)."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{key}={escaped}\n"


def broker_classpath() -> str:
    """The embedded broker's class path (fetched from Maven Central on first use)."""
    return os.pathsep.join(resolve(BROKER_ARTIFACTS, f"kafka-{KAFKA_VERSION}"))


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, ask for SIGTERM when the parent dies, so that a
    killed test run or demo leaves no broker behind. (Linux sends it when the *thread* that
    started the broker ends: start a broker from a thread that outlives it.)"""
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
    ``{"log.cleaner.backoff.ms": "500"}``. ``sasl_users`` (user -> password): clients must
    authenticate with SASL/PLAIN as one of them (see the module's documentation);
    :attr:`client_config` holds the settings of a client. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`::

        with EmbeddedBroker(sasl_users={"alice": "secret"}) as broker:
            io.kafka(broker.bootstrap, config=broker.client_config)
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        data_dir: str | None = None,
        log_path: str | None = None,
        config: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
        sasl_users: dict[str, str] | None = None,
    ) -> None:
        users = dict(sasl_users or {})
        for name in users:
            if not _USER_NAME.fullmatch(name) or name == INTERNAL_USER:
                raise ValueError(
                    f"embedded broker: SASL user name {name!r} must be letters, digits, '_', "
                    f"'.' or '-' (and not {INTERNAL_USER!r})"
                )
        self.sasl_users = users
        self._internal_password = secrets.token_urlsafe(24)
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
    def bootstrap(self) -> str:
        """The bootstrap servers, as :attr:`bootstrap_servers`."""
        return self.bootstrap_servers

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings a client needs besides the bootstrap servers: none without SASL,
        else those of the first of ``sasl_users`` (see :meth:`client_config_for`)."""
        return self.client_config_for(next(iter(self.sasl_users), None))

    def client_config_for(self, user: str | None) -> dict[str, str]:
        """librdkafka settings (``security.protocol``, ``sasl.*``) of a client logging in as
        ``user`` (one of ``sasl_users``); empty for a broker without SASL."""
        if not self.sasl_users or user is None:
            return {}
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": self.sasl_users[user],
        }

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def server_properties(self, log_dir: str, controller_port: int) -> dict[str, str]:
        """The node's server properties: defaults for one node, then :attr:`config`."""
        name = protocol = "SASL_PLAINTEXT" if self.sasl_users else "PLAINTEXT"
        listener = f"{name}://{self.host}:{self.port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{controller_port}",
            "listeners": f"{listener},CONTROLLER://{self.host}:{controller_port}",
            "advertised.listeners": listener,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": name,
            "listener.security.protocol.map": f"{name}:{protocol},CONTROLLER:{protocol}",
            **self._sasl_properties(name),
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

    def _sasl_properties(self, listener: str) -> dict[str, str]:
        """SASL/PLAIN on the client (and inter-broker) listener and the controller listener:
        the users, and the internal user the broker logs in as on both."""
        if not self.sasl_users:
            return {}
        jaas = plain_jaas_config(INTERNAL_USER, self._internal_password,
                                 {INTERNAL_USER: self._internal_password, **self.sasl_users})
        return {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
        }

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
        fd = os.open(props_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # passwords
        with os.fdopen(fd, "w") as f:
            f.writelines(_property_line(k, v) for k, v in props.items())
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
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: not read as an option
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
                admin = admin or AdminClient(
                    {"bootstrap.servers": self.bootstrap_servers, **self.client_config})
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
