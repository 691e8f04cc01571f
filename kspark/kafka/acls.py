"""The ACLs a kspark application needs on a Kafka cluster with an authorizer, and the check at
``StreamsApp.start()`` that its principal has them.

An application reads its source topics; creates (unless ``create=False``) and writes the topics
it writes, and reads back and verifies the configs of those it restores or checks (changelogs,
repartition topics, its sink-marker topic); and writes in transactions under the transactional
ids ``<application id>-kspark-sink-*`` (``kspark.io.kafka.required_acls`` lists exactly that for
an application);
:func:`check_acls` asks the cluster which operations the principal has on existing topics
(Kafka's authorized operations, KIP-430) and whether it may describe kspark's readers' group, and
raises :class:`KafkaAuthorizationError` naming the first resource and operation missing, before
anything is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kspark.errors import KsparkError

TOPIC = "TOPIC"
GROUP = "GROUP"
TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
LITERAL = "LITERAL"
PREFIXED = "PREFIXED"
#: operations that imply DESCRIBE (Kafka's authorizer allows DESCRIBE with any of them)
_IMPLY_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER"})
#: topics roles that an application reads back, and whose configs it verifies
_READ_BACK = frozenset({"changelog", "repartition", "sink-marker"})


class KafkaAuthorizationError(KsparkError):
    """The cluster's authorizer denies the application's principal an operation it needs."""


@dataclass(frozen=True)
class AclNeed:
    """One ACL an application needs: ``operation`` on a resource (``resource_type`` ``TOPIC``,
    ``GROUP`` or ``TRANSACTIONAL_ID``; ``name`` matched ``LITERAL`` or ``PREFIXED``), and
    ``why``."""

    resource_type: str
    name: str
    operation: str
    why: str
    pattern: str = LITERAL

    def __str__(self) -> str:
        match = " (prefix)" if self.pattern == PREFIXED else ""
        return f"{self.operation} on {self.resource_type} {self.name!r}{match}: {self.why}"

    def binding(self, principal: str, host: str = "*") -> Any:
        """This ACL allowing ``principal`` (e.g. ``"User:alice"``), as confluent-kafka's
        ``AclBinding`` for ``AdminClient.create_acls``."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        return AclBinding(ResourceType[self.resource_type], self.name,
                          ResourcePatternType[self.pattern], principal, host,
                          AclOperation[self.operation], AclPermissionType.ALLOW)


def topic_acls(name: str, role: str, create: bool = True) -> list[AclNeed]:
    """The ACLs on one topic of the application: READ on a source; WRITE (and CREATE when
    kspark creates it) on a topic it writes, plus READ and DESCRIBE_CONFIGS on one it reads
    back (a changelog, a repartition topic, the sink-marker topic)."""
    if role == "source":
        return [AclNeed(TOPIC, name, "READ", "source topic")]
    needs = [AclNeed(TOPIC, name, "WRITE", f"{role} topic")]
    if create:
        needs.append(AclNeed(TOPIC, name, "CREATE", f"{role} topic, created at start"))
    if role in _READ_BACK:
        needs += [AclNeed(TOPIC, name, "READ", f"{role} topic, read back"),
                  AclNeed(TOPIC, name, "DESCRIBE_CONFIGS", f"{role} topic, its configs checked")]
    return needs


def transaction_acl(transactional_id_prefix: str) -> AclNeed:
    """WRITE on an application's transactional ids (a prefix ACL)."""
    return AclNeed(TRANSACTIONAL_ID, transactional_id_prefix, "WRITE", "exactly-once writes",
                   PREFIXED)


def group_acl(group: str) -> AclNeed:
    """DESCRIBE on the consumer group of kspark's readers (they read assigned partitions and
    commit nothing, but Kafka's clients look their group up)."""
    return AclNeed(GROUP, group, "DESCRIBE", "kspark's readers look up their group")


def _denied(bootstrap_servers: str, config: dict[str, Any], need: AclNeed) -> str:
    who = config.get("sasl.username")
    principal = f"principal User:{who}" if who else "the client's principal"
    return (f"Kafka at {bootstrap_servers}: {principal} is not allowed {need.operation} on "
            f"{need.resource_type.lower().replace('_', ' ')} {need.name!r} ({need.why}); give "
            "it the ACLs the application needs (docs/api.md: ACLs an application needs)")


def denied_error(bootstrap_servers: str, config: dict[str, Any], need: AclNeed
                 ) -> KafkaAuthorizationError:
    """The error for ``need`` denied by the cluster."""
    return KafkaAuthorizationError(_denied(bootstrap_servers, config, need))


def check_acls(bootstrap_servers: str, config: dict[str, Any], needs: list[AclNeed],
               timeout: float = 15.0) -> None:
    """Raise :class:`KafkaAuthorizationError` for the first of ``needs`` that the cluster does
    not allow the client (a cluster without an authorizer allows all): operations on existing
    topics as the cluster reports them, DESCRIBE on a group by describing it. (CREATE and
    transactional ids are found out where they are used: creating topics, taking over the
    transactional ids, both at start.)"""
    from confluent_kafka.admin import AdminClient

    if not needs:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 4, **config})
    topics = _topic_operations(admin, sorted({n.name for n in needs if n.resource_type == TOPIC}),
                               timeout)
    for need in needs:
        if need.resource_type == GROUP and not _group_visible(admin, need.name, timeout):
            raise denied_error(bootstrap_servers, config, need)
        have = topics.get(need.name) if need.resource_type == TOPIC else None
        if have is None or "ALL" in have or need.operation in have:
            continue
        if need.operation == "DESCRIBE" and have & _IMPLY_DESCRIBE:
            continue
        if need.operation == "CREATE":
            continue  # a CREATE on an existing topic is never asked for
        raise denied_error(bootstrap_servers, config, need)


def _topic_operations(admin: Any, names: list[str], timeout: float) -> dict[str, set[str] | None]:
    """The operations the cluster allows the client on each topic (None: it did not say, as a
    cluster without an authorizer does not)."""
    from confluent_kafka import KafkaException, TopicCollection

    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout,
                                    include_authorized_operations=True)
    allowed: dict[str, set[str] | None] = {}
    for name, future in futures.items():
        try:
            ops = future.result().authorized_operations
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_AUTHORIZATION_FAILED":
                raise
            ops = []
        allowed[name] = None if ops is None else {op.name for op in ops}
    return allowed


#: a group coordinator that is starting (a new cluster's first group request creates the
#: offsets topic): asked again until ``timeout``
_COORDINATOR_STARTING = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                         "NOT_COORDINATOR")


def _group_visible(admin: Any, group: str, timeout: float) -> bool:
    """Whether the cluster lets the client describe consumer group ``group``."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
        try:
            future.result()
            return True
        except KafkaException as exc:
            name = exc.args[0].name()
            if name == "GROUP_AUTHORIZATION_FAILED":
                return False
            if name not in _COORDINATOR_STARTING or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
