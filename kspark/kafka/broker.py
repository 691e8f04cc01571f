"""The embedded broker: Apache Kafka itself, one KRaft node on loopback, for development and tests.

It runs Apache Kafka's own server (``org.apache.kafka:kafka_2.13``, fetched from Maven Central on
first use and cached, see :mod:`kspark.jvm.maven`) in a JVM of its own: one node that is both broker
and controller (KRaft, no ZooKeeper), its data in a temporary directory that is removed at stop,
or in ``data_dir`` where it survives. Internal topics (offsets, transactions) have one replica,
so Kafka transactions and consumer groups work as on a cluster. Topics keep their records
forever unless they set ``retention.ms`` themselves (Kafka's default is 7 days by record
timestamp).

Security (see :mod:`kspark.kafka.security`): with ``sasl_users`` every listener authenticates
with SASL: the client listener, which is also the inter-broker listener, and the controller
listener. Clients log in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (``sasl_mechanism`` picks
what :attr:`EmbeddedBroker.client_config` uses; SCRAM users are created when the storage is
formatted). The broker itself logs in with PLAIN as an internal user with a random password of
its own; PLAIN's users and passwords live in each listener's
``listener.name.<name>.plain.sasl.jaas.config`` (no JAAS file). ``tls=True`` puts the listeners on
TLS (``SSL``, or ``SASL_SSL`` with users) with certificates of a CA of its own. ``acls=True``
turns on Kafka's ``StandardAuthorizer``: users may do only what an ACL allows, except
``super_users``.
"""

from __future__ import annotations

import base64
import os
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
from kspark.jvm.class_archive import archive_options
from kspark.jvm.maven import resolve
from kspark.kafka.security import (
    INTERNAL_USER,
    SASL_MECHANISMS,
    USER_NAME,
    Certificates,
    acl_properties,
    create_scram_users,
    jaas_quote,
    make_certificates,
    plain_jaas_config,
    sasl_properties,
    tls_properties,
)

__all__ = ["BROKER_ARTIFACTS", "INTERNAL_USER", "KAFKA_VERSION", "BrokerError", "EmbeddedBroker",
           "free_port", "jaas_quote", "plain_jaas_config"]

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
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
"""


class BrokerError(KsparkError):
    """The embedded broker could not be fetched, started or reached, or it died."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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
    authenticate as one of them, with ``sasl_mechanism`` in :attr:`client_config` (PLAIN,
    SCRAM-SHA-256 or SCRAM-SHA-512; the broker accepts all three). ``tls``: listeners on TLS,
    with certificates made in ``tls_dir`` (a directory of the broker's own if not given; kept
    there, so a broker restarted on it keeps its CA); ``client_auth`` also asks clients for a
    certificate of that CA (:meth:`client_certificate`). ``acls``: Kafka's ``StandardAuthorizer``
    (needs ``sasl_users``): a user may do only what an ACL allows, except ``super_users``.
    :attr:`client_config` holds the settings of a client. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`::

        with EmbeddedBroker(sasl_users={"alice": "secret"}, tls=True) as broker:
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
        sasl_mechanism: str = "PLAIN",
        tls: bool = False,
        tls_dir: str | None = None,
        client_auth: bool = False,
        acls: bool = False,
        super_users: tuple[str, ...] = (),
    ) -> None:
        users = dict(sasl_users or {})
        for name in users:
            if not USER_NAME.fullmatch(name) or name == INTERNAL_USER:
                raise ValueError(
                    f"embedded broker: SASL user name {name!r} must be letters, digits, '_', "
                    f"'.' or '-' (and not {INTERNAL_USER!r})"
                )
        if sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"embedded broker: sasl_mechanism must be one of "
                             f"{', '.join(SASL_MECHANISMS)}: {sasl_mechanism!r}")
        if acls and not users:
            raise ValueError("embedded broker: acls=True needs sasl_users (the principals ACLs "
                             "name)")
        if client_auth and not tls:
            raise ValueError("embedded broker: client_auth=True needs tls=True")
        unknown = [u for u in super_users if u not in users]
        if unknown:
            raise ValueError(f"embedded broker: super user {unknown[0]!r} is not one of "
                             "sasl_users")
        self.sasl_users = users
        self.sasl_mechanism = sasl_mechanism
        self.tls = tls
        self.client_auth = client_auth
        self.acls = acls
        self.super_users = tuple(super_users)
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
        self._certificates: Certificates | None = None
        if tls:
            directory = tls_dir or tempfile.mkdtemp(prefix="kspark-kafka-tls-")
            names = ("broker", "client") if client_auth else ("broker",)
            self._certificates = make_certificates(directory, names, hosts=(host, "localhost"))

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers, as :attr:`bootstrap_servers`."""
        return self.bootstrap_servers

    @property
    def security_protocol(self) -> str:
        """The listeners' protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
        if self.sasl_users:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def certificates(self) -> Certificates | None:
        """The TLS certificates (None without ``tls``)."""
        return self._certificates

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings a client needs besides the bootstrap servers: none for a
        plaintext broker without users, else those of the first of ``sasl_users`` (see
        :meth:`client_config_for`)."""
        return self.client_config_for(next(iter(self.sasl_users), None))

    def client_config_for(self, user: str | None, mechanism: str | None = None
                          ) -> dict[str, str]:
        """librdkafka settings (``security.protocol``, ``sasl.*``, ``ssl.*``) of a client
        logging in as ``user`` (one of ``sasl_users``) with ``mechanism`` (by default
        ``sasl_mechanism``); with TLS, trusting the broker's CA (and presenting the client
        certificate when the broker asks for one)."""
        config: dict[str, str] = {}
        if self.security_protocol != "PLAINTEXT":
            config["security.protocol"] = self.security_protocol
        if self._certificates is not None:
            config.update(self._certificates.client_config(
                "client" if self.client_auth else None))
        if self.sasl_users and user is not None:
            config.update({
                "sasl.mechanism": mechanism or self.sasl_mechanism,
                "sasl.username": user,
                "sasl.password": self.sasl_users[user],
            })
        return config

    def internal_config(self) -> dict[str, str]:
        """librdkafka settings of a client logging in as the broker's own user (a super user
        under ACLs): for administering the broker in tests and tools, not for applications."""
        config = self.client_config_for(None)
        if self.sasl_users:
            config.update({"sasl.mechanism": "PLAIN", "sasl.username": INTERNAL_USER,
                           "sasl.password": self._internal_password})
        return config

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def server_properties(self, log_dir: str, controller_port: int) -> dict[str, str]:
        """The node's server properties: defaults for one node, then :attr:`config`."""
        name = protocol = self.security_protocol
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
            **(sasl_properties(name, self._internal_password, self.sasl_users)
               if self.sasl_users else {}),
            **(tls_properties(self._certificates, self.client_auth)
               if self._certificates is not None else {}),
            **(acl_properties(self.super_users) if self.acls else {}),
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
            # a node restarted after a crash leads its partitions again once the controller has
            # fenced its previous incarnation, when that one's session expires (Kafka's default:
            # 9 s, with a heartbeat every 2 s)
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
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
        # the broker's class archive (not the storage tool's above)
        archive = archive_options("kafka-broker", java, classpath.split(os.pathsep), JVM_OPTIONS)
        self._proc = subprocess.Popen(
            [*jvm, *archive, "kafka.Kafka", props_path],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it
            preexec_fn=_die_with_parent,
        )
        try:
            self._wait_ready()
            if self.sasl_users:
                create_scram_users(self.bootstrap_servers, self.internal_config(),
                                   self.sasl_users)
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
                    {"bootstrap.servers": self.bootstrap_servers, **self.internal_config()})
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

    def kill(self) -> None:
        """Kill the broker at once (SIGKILL: no controlled shutdown, as a crash), keeping its
        data; :meth:`start` on the same ``data_dir`` (and port) brings it back."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
