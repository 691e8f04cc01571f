"""Topic administration: the topics an application needs, created or verified on the cluster."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kspark.errors import KsparkError
from kspark.kafka.acls import TOPIC, AclNeed, denied_error

if TYPE_CHECKING:  # not imported where only Kafka is used (a Spark source's planner)
    from kspark.topology.internals.plan import ExecutionPlan
    from kspark.topology.topology import Topology

OUTPUT = "output"
CHANGELOG = "changelog"
REPARTITION = "repartition"
SOURCE = "source"
MARKER = "sink-marker"
DEAD_LETTER = "dead-letter"

_TIMEOUT = 15.0


class TopicError(KsparkError):
    """A Kafka topic is missing, differs from what the application needs, or lost records."""


class KafkaUnreachableError(KsparkError):
    """No broker of a Kafka cluster answered."""


class KafkaAuthenticationError(KafkaUnreachableError):
    """A Kafka cluster refused the client's credentials (SASL authentication failed), or the
    client could not verify the cluster's TLS certificate."""


class AuthenticationWatch:
    """An ``error_cb`` for librdkafka clients that remembers the first authentication error
    (librdkafka retries a refused login until the request's timeout) and passes every error
    on to the user's own ``error_cb``, if any."""

    def __init__(self, bootstrap_servers: str, chained: Any = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.chained = chained
        self.reason: str | None = None

    def __call__(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if self.reason is None and error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            # "sasl_plaintext://host:port/bootstrap: SASL authentication error: ...", or
            # "ssl://host:port/bootstrap: SSL handshake failed: ...: certificate verify failed"
            text = error.str()
            head, sep, rest = text.partition(": ")
            self.reason = rest if sep and "://" in head else text
        if self.chained is not None:
            self.chained(error)

    def check(self) -> None:
        """Raise :class:`KafkaAuthenticationError` if the cluster refused the login."""
        if self.reason is not None:
            raise KafkaAuthenticationError(
                f"Kafka at {self.bootstrap_servers}: authentication failed: {self.reason}\n"
                "Check the security settings in the Kafka config (security.protocol, "
                "sasl.mechanism, sasl.username, sasl.password; ssl.ca.location for TLS)."
            )

    def watching(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with this watch as its ``error_cb``."""
        return {**config, "error_cb": self}


@dataclass(frozen=True)
class TopicSpec:
    """What a topic must look like: its partition count and the configs that matter (e.g.
    ``cleanup.policy``)."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    role: str = OUTPUT


def client_config(bootstrap_servers: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka settings for a client of ``bootstrap_servers`` plus the user's own: its log
    says warnings and errors (librdkafka's informational lines, e.g. one per closed producer,
    are left out unless the user's ``log_level`` asks for them), and a short
    ``reconnect.backoff.ms``: it also paces a new client's first connections to the brokers it
    learns of, which kspark's short-lived clients of each micro-batch would wait for every
    time (the backoff still doubles for a broker that is down, up to
    ``reconnect.backoff.max.ms`` of 1 s, the Java clients' default, not librdkafka's 10 s: a
    broker that comes back is found within a second)."""
    return {"bootstrap.servers": bootstrap_servers, "log_level": 4, "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 1000, **(extra or {})}


def _admin(bootstrap_servers: str, config: dict[str, Any] | None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(bootstrap_servers, config))


def cluster_metadata(bootstrap_servers: str, config: dict[str, Any] | None = None,
                     topic: str | None = None) -> Any:
    """The cluster's metadata (topics and partitions; of ``topic`` only if given: a topic the
    authorizer hides is missing from the whole list, but named with its error when asked for),
    or an error naming the address: at once (about a second) when the cluster refuses the
    client's credentials."""
    import time

    from confluent_kafka import KafkaException

    _check_reachable(bootstrap_servers)
    settings = client_config(bootstrap_servers, config)
    watch = AuthenticationWatch(bootstrap_servers, settings.get("error_cb"))
    admin = _admin(bootstrap_servers, watch.watching(settings))
    deadline = time.monotonic() + _TIMEOUT
    while True:  # short tries: a refused login shows (in error_cb) between them
        try:
            return admin.list_topics(topic,
                                     timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            admin.poll(0)
            if watch.reason is None and time.monotonic() < deadline:
                continue
            failure = exc.args[0].str()  # (not the exception: its traceback holds the client)
        admin = None  # the client stops retrying now
        watch.check()
        raise KafkaUnreachableError(
            f"cannot reach Kafka at {bootstrap_servers} within {_TIMEOUT:.0f} s: {failure} (is "
            "the broker running, and are the bootstrap servers and security settings right?)"
        )


def _check_reachable(bootstrap_servers: str, timeout: float = 5.0) -> None:
    """Fail fast when no bootstrap server accepts a TCP connection (a client would retry for
    the whole metadata timeout)."""
    import socket

    problems = []
    for address in bootstrap_servers.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            problems.append(f"{address.strip()}: {exc}")
    raise KafkaUnreachableError(
        f"cannot reach Kafka at {bootstrap_servers}: {'; '.join(problems)} (is the broker "
        "running, and are the bootstrap servers right?)"
    )


def partition_counts(
    bootstrap_servers: str, topics: list[str], config: dict[str, Any] | None = None,
    denied_as_missing: bool = False, needed: Mapping[str, AclNeed] | None = None,
) -> dict[str, int | None]:
    """The number of partitions of each topic, ``None`` for a topic that does not exist. A
    topic the cluster's authorizer hides from the client raises
    :class:`~kspark.kafka.acls.KafkaAuthorizationError` naming what ``needed`` gives for it
    (else DESCRIBE), or counts as missing with ``denied_as_missing`` (it may not exist: a
    cluster does not tell such a client)."""
    metadata = cluster_metadata(bootstrap_servers, config)
    out: dict[str, int | None] = {}
    for name in topics:
        meta = metadata.topics.get(name)
        if meta is None:  # missing, or hidden by the authorizer: ask for it by name
            meta = cluster_metadata(bootstrap_servers, config, name).topics.get(name)
        if (meta is not None and meta.error is not None and not denied_as_missing
                and meta.error.name() == "TOPIC_AUTHORIZATION_FAILED"):
            need = (needed or {}).get(name) or AclNeed(TOPIC, name, "DESCRIBE", "its metadata")
            raise denied_error(bootstrap_servers, config or {}, need)
        ok = meta is not None and meta.error is None and len(meta.partitions) > 0
        out[name] = len(meta.partitions) if ok else None
    return out


def matching_topics(
    bootstrap_servers: str, pattern: str, config: dict[str, Any] | None = None
) -> dict[str, int]:
    """Topics whose whole name matches the regular expression ``pattern``: name -> partitions."""
    import re

    regex = re.compile(pattern)
    metadata = cluster_metadata(bootstrap_servers, config)
    return {
        name: len(meta.partitions)
        for name, meta in metadata.topics.items()
        if regex.fullmatch(name) and meta.error is None and not name.startswith("__")
    }


def ensure_topics(
    bootstrap_servers: str,
    specs: list[TopicSpec],
    create: bool = True,
    config: dict[str, Any] | None = None,
    replication_factor: int = -1,
) -> list[str]:
    """Create the missing topics of ``specs`` (or, with ``create=False``, raise naming them) and
    check that existing ones have the partition count and configs asked for. Returns the names
    of the topics it created. ``replication_factor=-1`` takes the broker's default."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    if not specs:
        return []
    needed = {s.name: AclNeed(TOPIC, s.name, "WRITE", f"{s.role} topic") for s in specs}
    counts = partition_counts(bootstrap_servers, [s.name for s in specs], config,
                              denied_as_missing=create, needed=needed)
    admin = _admin(bootstrap_servers, config)
    missing = [s for s in specs if counts[s.name] is None]
    if missing and not create:
        names = ", ".join(f"{s.name!r} ({s.role})" for s in missing)
        raise TopicError(f"Kafka topics missing on {bootstrap_servers}: {names}")
    created = []
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(s.name, s.partitions, replication_factor, config=dict(s.config))
                for s in missing
            ],
            operation_timeout=_TIMEOUT,
            request_timeout=_TIMEOUT,
        )
        for name, future in futures.items():
            try:
                future.result()
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].name() in ("TOPIC_AUTHORIZATION_FAILED",
                                          "CLUSTER_AUTHORIZATION_FAILED"):
                    role = next(s.role for s in missing if s.name == name)
                    raise denied_error(bootstrap_servers, config or {}, AclNeed(
                        TOPIC, name, "CREATE", f"{role} topic, created at start")) from None
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # created meanwhile: verify
                    raise TopicError(
                        f"cannot create Kafka topic {name!r} on {bootstrap_servers}: "
                        f"{exc.args[0].str()}"
                    ) from exc
        counts.update(_created_counts(bootstrap_servers, [s.name for s in missing], config,
                                      needed))
    _verify(admin, bootstrap_servers, specs, counts, config or {})
    return created


def _created_counts(bootstrap_servers: str, names: list[str], config: dict[str, Any] | None,
                    needed: dict[str, AclNeed]) -> dict[str, int | None]:
    """The partition counts of topics just created: a broker's metadata may show a new topic
    only a moment after its creation returns, so ask again for up to :data:`_TIMEOUT`."""
    deadline = time.monotonic() + _TIMEOUT
    while True:
        counts = partition_counts(bootstrap_servers, names, config, needed=needed)
        if all(counts[name] is not None for name in names) or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


def _verify(
    admin: Any, bootstrap_servers: str, specs: list[TopicSpec], counts: dict[str, int | None],
    config: dict[str, Any],
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    for spec in specs:
        have = counts.get(spec.name)
        if have is None:
            raise TopicError(f"Kafka topic {spec.name!r} on {bootstrap_servers} does not exist")
        if have != spec.partitions:
            raise TopicError(
                f"Kafka topic {spec.name!r} ({spec.role}) has {have} partitions; the application "
                f"needs {spec.partitions}"
            )
    checked = [s for s in specs if s.config]
    if not checked:
        return
    futures = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, s.name) for s in checked], request_timeout=_TIMEOUT
    )
    by_name = {resource.name: future for resource, future in futures.items()}
    for spec in checked:
        try:
            entries = by_name[spec.name].result()
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_AUTHORIZATION_FAILED":
                raise
            raise denied_error(bootstrap_servers, config, AclNeed(
                TOPIC, spec.name, "DESCRIBE_CONFIGS", f"{spec.role} topic, its configs checked")
            ) from None
        for key, want in spec.config.items():
            entry = entries.get(key)
            if entry is not None and entry.value is not None and entry.value != want:
                raise TopicError(
                    f"Kafka topic {spec.name!r} ({spec.role}) has {key}={entry.value}; the "
                    f"application needs {key}={want}"
                )


def written_topics(application_id: str, topology: Topology, dead_letter_topic: str | None
                   ) -> dict[str, tuple[str, dict[str, str]]]:
    """Every topic an application writes, with its role and the configs Kafka Streams would
    give it: output topics and the dead-letter topic, repartition topics
    (``cleanup.policy=delete``) and the changelogs of logged stores (compacted)."""
    from kspark.state.internals.changelog import changelog_topic, changelog_topic_config

    written: dict[str, tuple[str, dict[str, str]]] = {
        t: (OUTPUT, {}) for t in topology.external_sink_topics()}
    if dead_letter_topic:
        written[dead_letter_topic] = (DEAD_LETTER, {})
    written.update({t: (REPARTITION, {"cleanup.policy": "delete"})
                    for t in topology.internal_topics})
    written.update({
        # compact (+ delete after retention if windowed)
        changelog_topic(application_id, name): (CHANGELOG, changelog_topic_config(builder))
        for name, builder in topology.store_builders.items()
        if builder.logging and name not in topology.source_stores
    })
    return written


def topology_topics(
    application_id: str, topology: Topology, plan: ExecutionPlan, dead_letter_topic: str | None
) -> list[TopicSpec]:
    """:func:`written_topics` as specs, with the partition counts of ``plan`` (a changelog has
    one partition per task)."""
    return [
        TopicSpec(name, plan.tasks if role == CHANGELOG else plan.partitions_of(name), config,
                  role)
        for name, (role, config) in written_topics(application_id, topology,
                                                   dead_letter_topic).items()
    ]
