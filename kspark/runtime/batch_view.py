"""What a processor's vectorised ``process_batch`` sees of one task's batch (:class:`BatchView`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from kspark.record_columns import RecordColumns
from kspark.records import Record, RecordMetadata
from kspark.runtime.context import RecordContext
from kspark.runtime.decoding import DecodedColumn
from kspark.runtime.forwarding import SinkChain
from kspark.runtime.serialized import SourceBatch
from kspark.topology.topology import ProcessorNode, SinkNode, SubTopology, Topology


def separate_branches(topology: Topology, children_of: dict[str, list[str]],
                      children: list[str]) -> bool:
    """Whether the sub-graphs below ``children`` share no node and no sink topic (then each
    branch may take a batch in turn and every topic keeps its order)."""
    if len(children) == 1:
        return True
    seen: set[str] = set()
    topics: set[str] = set()
    for child in children:
        branch, todo = set(), [child]
        while todo:
            name = todo.pop()
            if name not in branch:
                branch.add(name)
                todo.extend(children_of.get(name, ()))
        sinks = {n.topic for n in map(topology.nodes.get, branch) if isinstance(n, SinkNode)}
        if branch & seen or sinks & topics:
            return False
        seen |= branch
        topics |= sinks
    return True


class BatchHost(Protocol):
    """What a :class:`BatchView` needs of its task (:class:`~kspark.runtime.task.Task`)."""

    topology: Topology
    sub_topology: SubTopology
    stream_time: int
    current: RecordContext

    def captures_changelog(self, store: str) -> bool: ...

    def forward(self, from_node: str, record: Record, child_name: str | None = None) -> None: ...

    def forward_all(self, from_node: str, records: list[Record]) -> None: ...

    def forward_columns(self, from_node: str, columns: RecordColumns) -> None: ...

    def sink_chain(self, node: str) -> SinkChain | None: ...


class FastPathAborted(Exception):
    """A vectorised batch path failed after changing state: rerun the batch record by record
    from the durable state (which reproduces the exact error, if it is one)."""


class BatchView:
    """The runtime's :class:`~kspark.processor.batch.RecordBatch`: what a processor's
    vectorised ``process_batch`` sees of one task's batch: decoded keys and values, timestamps,
    and hooks to run single records the exact way and to forward results in the context of a
    given record."""

    def __init__(
        self,
        task: BatchHost,
        node: str,
        batch: SourceBatch,
        keys: DecodedColumn,
        values: DecodedColumn,
    ) -> None:
        self.task = task
        self.node = node
        self.batch = batch
        self.keys = keys
        self.values = values
        self.timestamps = batch.timestamps
        #: the task's stream time after each record
        self.stream_times = np.maximum.accumulate(
            np.maximum(batch.timestamps, task.stream_time)
        )

    def __len__(self) -> int:
        return len(self.batch)

    def captures_changelog(self, store: str) -> bool:
        return self.task.captures_changelog(store)

    def stores_of_other_nodes(self, store: str) -> bool:
        """Whether any other processor of the sub-topology is connected to ``store``."""
        topo = self.task.topology
        for name in self.task.sub_topology.nodes:
            node = topo.nodes[name]
            if name != self.node and isinstance(node, ProcessorNode) and store in node.stores:
                return True
        return False

    def _enter(self, i: int) -> RecordMetadata:
        self.task.stream_time = int(self.stream_times[i])
        return self.batch.metadata(i)

    def process_exact(self, i: int, process: Callable[[Record], None]) -> None:
        """Run record ``i`` through ``process`` as the record-by-record path would deliver it."""
        ts = int(self.timestamps[i])
        rec = Record(self.keys.value(i), self.values.value(i), ts)
        self.task.current.run_in(self.node, ts, self._enter(i), lambda: process(rec))

    def run_at(self, i: int, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` in the processor's context while record ``i`` is being processed."""
        return self.task.current.run_in(self.node, int(self.timestamps[i]), self._enter(i), fn)

    def forward_at(self, i: int, records: list[Record]) -> None:
        """Forward ``records`` from the processor while record ``i`` is being processed."""
        self.forward_groups([i], [records])

    def forward_each(self, positions: np.ndarray, records: list[Record]) -> None:
        """Forward each record from the processor while the record at its position
        (``positions``, nondecreasing) is being processed."""
        if not records:
            return
        if self.task.sink_chain(self.node) is not None and all(
            r.timestamp is not None for r in records
        ):
            self.task.forward_all(self.node, records)  # the sink does not see the position
            return
        cuts = np.flatnonzero(positions[1:] != positions[:-1]) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(records)]
        self.forward_groups(
            positions[starts].tolist(), [records[a:b] for a, b in zip(starts, ends)]
        )

    def forward_columns(self, positions: np.ndarray, columns: RecordColumns) -> None:
        """:meth:`forward_each` of ``columns.records()``; into a sink chain without making
        the records where its operators map columns (:meth:`Task.forward_columns`)."""
        if not len(columns):
            return
        if self.task.sink_chain(self.node) is not None:
            self.task.forward_columns(self.node, columns)  # the sink does not see the position
            return
        self.forward_each(positions, columns.records())

    def forward_groups(self, positions: Sequence[int], groups: list[list[Record]]) -> None:
        """For each position ``i`` in increasing order, forward its group of records from the
        processor while record ``i`` is being processed."""
        task, node, batch = self.task, self.node, self.batch
        current = task.current
        forward = task.forward
        at = list(positions)
        stamps = self.timestamps[at].tolist()
        stream_times = self.stream_times[at].tolist()
        parts = batch.partitions[at].tolist()
        offsets = batch.offsets[at].tolist()
        previous = current.node, current.timestamp, current.metadata
        try:
            for k, i in enumerate(at):
                task.stream_time = stream_times[k]
                current.node, current.timestamp = node, stamps[k]
                current.metadata = RecordMetadata(batch.topic_at(i), parts[k], offsets[k])
                for rec in groups[k]:
                    forward(node, rec)
        finally:
            current.node, current.timestamp, current.metadata = previous
