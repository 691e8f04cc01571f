"""The Processor API users implement and the context handed to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mypy_extensions import mypyc_attr

from kspark._duration import Duration, to_ms
from kspark.processor.punctuation import Cancellable, PunctuationType, check_interval
from kspark.records import Record, RecordMetadata

if TYPE_CHECKING:
    pass


#: the prefix of :meth:`ProcessorContext.shared_state` names among the task's processor states
SHARED_STATE_PREFIX: Final = "@shared:"


@mypyc_attr(allow_interpreted_subclasses=True)  # users' processors subclass it
class Processor:
    """Base class of user processors: ``init`` once, ``process`` per record, ``close`` at end."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Forwarder:
    """What a task forwards its records through (the runtime's
    :class:`kspark.runtime.forwarding.Forwarding`); declared here so that a context's forward
    is a direct call in the compiled core."""

    def forward(self, from_node: str, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` from ``from_node`` to its children (or the named child)."""
        raise NotImplementedError


class ProcessorContext:
    """A processor's view of its task: forwarding, schedules, stores, clocks and metadata.

    The task behind it (``_task``) is the runtime's :class:`kspark.runtime.task.Task`.
    """

    def __init__(self, task: Any, node_name: str) -> None:
        self._task = task
        self._forwarding: Forwarder = task.forwarding
        self._node = node_name
        self._slots = 0

    @property
    def task_id(self) -> str:
        return self._task.task_id

    @property
    def partition(self) -> int:
        """The partition this task processes (of each topic it reads)."""
        return int(self._task.partition)

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def processor_name(self) -> str:
        return self._node

    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` to every child, or only to ``child_name``."""
        self._forwarding.forward(self._node, record, child_name)

    def forward_all(self, records: list[Record]) -> None:
        """Send each of ``records`` to every child, in order: the same as calling
        :meth:`forward` for each, done a list at a time where the records go down a straight
        chain of stateless operators into a sink."""
        self._task.forward_all(self._node, records)

    def schedule(
        self, interval: Duration, type: PunctuationType, callback: Callable[[int], Any]
    ) -> Cancellable:
        """Call ``callback(now)`` every ``interval`` of stream time or wall-clock time."""
        interval_ms = to_ms(interval, "punctuation interval")
        check_interval(interval_ms)
        if not isinstance(type, PunctuationType):
            raise TypeError(f"punctuation type must be a PunctuationType, got {type!r}")
        slot = self._slots
        self._slots += 1
        return self._task.schedule(self._node, slot, interval_ms, type, callback)

    def key_serde(self) -> Any:
        """The application's default key serde (``default.key.serde``)."""
        return self._task.config.default_key_serde

    def value_serde(self) -> Any:
        """The application's default value serde (``default.value.serde``)."""
        return self._task.config.default_value_serde

    def get_state_store(self, name: str) -> Any:
        return self._task.get_state_store(self._node, name)

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.wall_clock_ms()

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record; ``None`` inside a punctuation."""
        return self._task.record_metadata()

    @property
    def processor_state(self) -> dict[str, Any]:
        """A small dict of this processor's own, persisted with the task across restarts
        (e.g. observed stream time). Values must be picklable."""
        return self._task.processor_state(self._node)

    def shared_state(self, name: str) -> dict[str, Any]:
        """A small dict shared by the processors of this task that ask for the same ``name``
        (the two sides of a join share their stream time so), persisted with the task across
        restarts as :attr:`processor_state` is. Values must be picklable."""
        return self._task.processor_state(SHARED_STATE_PREFIX + name)

    def record_dropped(self, reason: str, detail: str) -> None:
        """Count a record in ``dropped-records`` and log why."""
        self._task.record_dropped(reason, detail)

    def commit(self) -> None:
        """Request a commit (kspark commits after every record in the driver and every batch
        on Spark, so this is a no-op kept for Kafka Streams compatibility)."""
