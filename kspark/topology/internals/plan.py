"""How a topology runs: its stages in order, how many tasks each has, and the partition count of
every topic it reads or writes, computed in one place from the partitions of its topics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kspark.errors import TopologyError
from kspark.topology.topology import SubTopology, Topology


@dataclass(frozen=True)
class ExecutionPlan:
    """``stages``: the sub-topologies, each after those whose output it reads. ``upstream``: the
    largest partition count of the source topics. ``partitions``: every topic with a location,
    and every internal topic, with its partition count (a sink without one of its own takes
    ``upstream``, as Kafka Streams creates output and repartition topics). ``tasks``: tasks per
    stage, the largest partition count of all but the global stores' topics (each task reads
    those whole), so every topic's partition has its task; a store's changelog has one
    partition per task."""

    stages: tuple[SubTopology, ...]
    upstream: int
    partitions: Mapping[str, int]
    tasks: int

    @classmethod
    def of(cls, topology: Topology, located: Mapping[str, int | None]) -> ExecutionPlan:
        """The plan of ``topology`` whose topics have the partition counts ``located`` (topic
        -> partitions, ``None`` where not known yet)."""
        global_topics = set(topology.global_topics())
        sources = topology.external_source_topics()
        upstream = max([located.get(t) or 1 for t in sources if t not in global_topics] or [1])
        partitions = {t: n or (1 if t in sources else upstream) for t, n in located.items()}
        fixed = copartitioned_counts(topology, located)
        for topic, n in topology.internal_topics.items():
            partitions[topic] = n or fixed.get(topic) or upstream
        # a global store's topic makes no tasks: every task reads all of its partitions
        tasks = max([n for t, n in partitions.items() if t not in global_topics], default=1)
        return cls(ordered_stages(topology), upstream, partitions, tasks)

    def partitions_of(self, topic: str) -> int:
        """The partition count of ``topic`` (``upstream`` for a topic with no location)."""
        return self.partitions.get(topic, self.upstream)


def copartitioned_counts(topology: Topology, located: Mapping[str, int | None]
                         ) -> dict[str, int]:
    """The partition count of every internal topic without one of its own that is
    co-partitioned with a located topic (a join's repartitioned side takes the count of the
    other side's topic, as Kafka Streams creates it). Raises :class:`TopologyError` naming the
    topics and their counts when co-partitioned topics have different counts."""
    out: dict[str, int] = {}
    for group in topology.copartition_groups:
        topics = list(dict.fromkeys(t for n in group for t in topology.upstream_topics(n)))
        counts: dict[str, int] = {t: n for t in topics if (n := located.get(t))}
        counts.update({t: n for t in topics
                       if (n := topology.internal_topics.get(t)) is not None})
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{t!r} ({n} partitions)" for t, n in counts.items())
            raise TopologyError(
                f"topics {listed} are joined by {', '.join(group)} and must have the same "
                "number of partitions (co-partitioning): give them the same count, or "
                "repartition one side (KStream.repartition) before the join"
            )
        if counts:
            n = next(iter(counts.values()))
            for t in topics:
                if t in topology.internal_topics and topology.internal_topics[t] is None:
                    out[t] = n
    return out


def ordered_stages(topology: Topology) -> tuple[SubTopology, ...]:
    """The sub-topologies in an order where each comes after every one whose output it reads."""
    subs = topology.sub_topologies()
    # a feedback topic is read in the micro-batch after the one that writes it
    writers = {t: s.id for s in subs for t in s.sink_topics
               if t not in topology.feedback_topics}
    done: list[SubTopology] = []
    pending = list(subs)
    while pending:
        finished = {d.id for d in done}
        ready = [s for s in pending
                 if all(writers.get(t) in (None, s.id) or writers[t] in finished
                        for t in s.source_topics)]
        if not ready:
            raise TopologyError(
                "sub-topologies read each other's output in a cycle: "
                f"{[s.source_topics for s in pending]}"
            )
        done.append(ready[0])
        pending.remove(ready[0])
    return tuple(done)
