"""Kafka topics as topic locations: ``StreamsApp(topics={"clicks": kspark.io.kafka(...)})``.

As a source, a topic is read by kspark's Spark source ``kspark_kafka`` (see
:mod:`kspark.spark.internals.kafka_source`); offsets live in the query's checkpoint. As a sink,
everything
a micro-batch writes to one cluster (outputs and changelogs) is one Kafka transaction, written
once (see :mod:`kspark.kafka.sink`). At ``StreamsApp.start()`` a source
topic must exist (else an error names it); output, changelog and repartition topics are created
with the partition count and cleanup policy the topology needs, or verified with
``create=False``.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kspark.io.kafka_writer import KafkaPartitionWriter
from kspark.io.location import AppView, TopicLocation
from kspark.kafka.acls import (
    AclNeed,
    check_acls,
    group_acl,
    topic_acls,
    transaction_acl,
)
from kspark.kafka.admin import (
    MARKER,
    TopicError,
    TopicSpec,
    ensure_topics,
    matching_topics,
    partition_counts,
    topology_topics,
    written_topics,
)
from kspark.kafka.reader import READER_GROUP
from kspark.kafka.sink import fence, marker_topic, transactional_id
from kspark.topology.topology import Topology

#: how a source topic may be read: kspark's source, Spark's connector, or the faster one here
SOURCES = ("auto", "kspark", "spark")

#: per application object: its partition writer for each Kafka cluster it writes to
_writers: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], KafkaPartitionWriter]] = (
    weakref.WeakKeyDictionary()
)


def writer_for(app: AppView, bootstrap_servers: str, config: dict[str, Any]
               ) -> KafkaPartitionWriter:
    """The one partition writer of ``app`` for a cluster (shared by all its topics there). Made
    at ``app.start()``: it first takes over the transactional ids of the app's writers, fencing
    any earlier instance of the application."""
    writers = _writers.setdefault(app, {})
    key = (bootstrap_servers, json.dumps(config, sort_keys=True, default=str))
    if key not in writers:
        fence(bootstrap_servers, app.application_id, range(app.spark_partitions), config)
        writers[key] = KafkaPartitionWriter(bootstrap_servers, app.application_id, config)
    return writers[key]


@dataclass
class KafkaTopic(TopicLocation):
    """A topic on a Kafka cluster.

    ``topic`` is the Kafka topic's name (or a list of names, read as one source), by default the
    topology's name for it; a source may instead read every topic matching ``pattern`` (a
    regular expression). ``partitions``: for a topic kspark creates, its partition count (by
    default that of the input). ``starting_offsets``: "earliest", "latest" or
    ``{"topic": {partition: offset}}`` for a query without a checkpoint.
    ``max_records_per_trigger`` caps a micro-batch. ``fail_on_data_loss=False`` skips (and
    counts) records deleted before they were read instead of stopping. ``create=False`` only
    verifies that the topics kspark writes exist as needed. ``config``: librdkafka settings for
    every client (security, timeouts...), e.g. ``{"security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN", "sasl.username": ..., "sasl.password": ...}``; kspark's source
    gets them as ``kafka.``-prefixed options, Spark's connector as its Java client's settings
    (``sasl.jaas.config`` from the user name and password). ``source`` reads a source topic
    with: "kspark", kspark's Python source ``kspark_kafka``; "spark", Spark's Kafka connector
    (``format("kafka")``, which a session of ``local_spark`` loads when it can fetch it; with
    ``config`` going to its Java clients); "auto" (the default), kspark's source (the faster
    one: docs/performance.md#kafka-source-choice).
    """

    bootstrap_servers: str
    topic: str | list[str] | None = None
    pattern: str | None = None
    partitions: int | None = None
    starting_offsets: str | dict[str, dict[int, int]] = "earliest"
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    create: bool = True
    config: dict[str, Any] = field(default_factory=dict, repr=False)  # may hold passwords
    source: str = "auto"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(
                f"kafka topic: source must be one of {', '.join(SOURCES)}: {self.source!r}")
        if self.topic is not None and self.pattern is not None:
            raise ValueError("kafka topic: give topic or pattern, not both")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"kafka topic: partitions must be >= 1, got {self.partitions}")
        self._name: str | None = None
        self._resolved: int | None = None
        self._writer: KafkaPartitionWriter | None = None

    # -- naming ----------------------------------------------------------------------------------
    def kafka_topics(self, name: str | None = None) -> list[str]:
        """The Kafka topic names this location reads or writes (not for a pattern)."""
        if isinstance(self.topic, list):
            return list(self.topic)
        own = self.topic or name or self._name
        if own is None:
            raise ValueError("kafka topic: no topic name yet (give topic=...)")
        return [own]

    @property
    def num_partitions(self) -> int | None:
        """Partitions of the topic (the largest, for several): as resolved at ``prepare``, else
        as asked for, else as found on the cluster (None if it does not exist yet)."""
        if self._resolved is not None:
            return self._resolved
        if self.partitions:
            return self.partitions
        counts: dict[str, int] | dict[str, int | None]
        if self.pattern is not None:
            counts = matching_topics(self.bootstrap_servers, self.pattern, self.config)
        elif self.topic is None and self._name is None:
            return None
        else:
            # (hidden by an authorizer: as missing here; start() names what is denied)
            counts = partition_counts(self.bootstrap_servers, self.kafka_topics(), self.config,
                                      denied_as_missing=True)
        known = [n for n in counts.values() if n]
        return max(known) if known else None

    # -- StreamsApp hooks --------------------------------------------------------------------
    def prepare(self, app: AppView, topic: str) -> None:
        """At ``app.start()``: check a source topic exists; create (or verify) a topic the
        application writes, with its partitions and cleanup policy."""
        self._name, self._resolved = topic, None
        self._writer = None
        if topic in app.topology.external_source_topics():
            self._resolved = self._check_source(app)
        specs = {s.name: s for s in topology_topics(
            app.application_id, app.topology, app.plan, app.config.dead_letter_topic)}
        spec = specs.get(topic)
        if spec is None:
            return
        if self.pattern is not None or len(self.kafka_topics()) != 1:
            raise TopicError(
                f"topic {topic!r} is written by {app.application_id!r}: give one "
                "Kafka topic name, not a pattern or a list"
            )
        target = self.kafka_topics()[0]
        markers = marker_topic(app.application_id)
        ensure_topics(
            self.bootstrap_servers,
            [
                TopicSpec(target, spec.partitions, spec.config, spec.role),
                TopicSpec(markers, 1, {"cleanup.policy": "compact"}, MARKER),
            ],
            create=self.create,
            config=self.config,
        )
        check_acls(self.bootstrap_servers, self.config,
                   topic_acls(target, spec.role, self.create)
                   + topic_acls(markers, MARKER, self.create) + [group_acl(READER_GROUP)])
        self._resolved = spec.partitions
        self._writer = writer_for(app, self.bootstrap_servers, self.config)
        self._writer.names[topic] = target

    def _check_source(self, app: AppView) -> int:
        if self.pattern is not None:
            return max(
                matching_topics(self.bootstrap_servers, self.pattern, self.config).values(),
                default=1,
            )
        names = self.kafka_topics()
        needs = [need for name in names for need in topic_acls(name, "source")]
        counts = partition_counts(self.bootstrap_servers, names, self.config,
                                  needed={need.name: need for need in needs})
        missing = [t for t in names if counts[t] is None]
        if missing:
            raise TopicError(
                f"Kafka topic {missing[0]!r} does not exist on {self.bootstrap_servers} "
                f"(source topic {self._name!r} of application {app.application_id!r}); create "
                "it first"
            )
        check_acls(self.bootstrap_servers, self.config, [*needs, group_acl(READER_GROUP)])
        return max(int(n or 1) for n in counts.values())

    def source_options(self, topic: str) -> dict[str, str]:
        """Options of the ``kspark_kafka`` Spark source for this location."""
        opts = {"kafka.bootstrap.servers": self.bootstrap_servers}
        if self.pattern is not None:
            opts["subscribePattern"] = self.pattern
        else:
            opts["subscribe"] = ",".join(self.kafka_topics(topic))
        offsets = self.starting_offsets
        opts["startingOffsets"] = (
            offsets
            if isinstance(offsets, str)
            else json.dumps(
                {t: {str(p): o for p, o in parts.items()} for t, parts in offsets.items()}
            )
        )
        if self.max_records_per_trigger:
            opts["maxOffsetsPerTrigger"] = str(self.max_records_per_trigger)
        opts["failOnDataLoss"] = str(self.fail_on_data_loss).lower()
        for key, value in self.config.items():
            opts[f"kafka.{key}"] = str(value)
        return opts

    def partition_writer(self) -> KafkaPartitionWriter | None:
        """The executors' writer of the app's topics on this cluster (``None`` for a source)."""
        return self._writer


def required_acls(application_id: str, topology: Topology, topics: Mapping[str, Any],
                  dead_letter_topic: str | None = None) -> dict[str, list[AclNeed]]:
    """The ACLs an application needs, per Kafka cluster (bootstrap servers) among ``topics``
    (the topology's topic names to their locations; other locations are left out): READ on
    its sources, WRITE and CREATE on what it writes (READ and DESCRIBE_CONFIGS too on what it
    reads back), the same on its sink-marker topic, WRITE on its transactional ids and DESCRIBE
    on kspark's readers' group."""
    written = written_topics(application_id, topology, dead_letter_topic)
    sources = set(topology.external_source_topics())
    needs: dict[str, list[AclNeed]] = {}
    writes: set[str] = set()
    for name, location in topics.items():
        if not isinstance(location, KafkaTopic):
            continue
        found = needs.setdefault(location.bootstrap_servers, [])
        if name in sources:
            if location.pattern is not None:
                found.append(AclNeed("TOPIC", location.pattern, "READ",
                                     "source topics (a pattern: an ACL for each match)"))
            found += [n for t in location.kafka_topics(name) for n in topic_acls(t, "source")]
        if name in written:
            found += topic_acls(location.kafka_topics(name)[0], written[name][0],
                                location.create)
            if location.bootstrap_servers not in writes:
                writes.add(location.bootstrap_servers)
                found += topic_acls(marker_topic(application_id), MARKER, location.create)
                found.append(transaction_acl(transactional_id(application_id)))
    for found in needs.values():
        found.append(group_acl(READER_GROUP))
    return needs


__all__ = ["KafkaTopic", "required_acls"]
