"""Value transformers of tables (Kafka Streams' ``ValueTransformerWithKey``,
``KTable.transform_values``): a stateful map of a table's values that may read and write state
stores but never forwards records itself and never changes a key."""

from __future__ import annotations

from typing import Any

from kspark.errors import TopologyError
from kspark.processor.fixed_key import FixedKeyProcessorContext


class ValueTransformerWithKey:
    """Base class of table value transformers: ``init`` once per task (and once more for each
    lookup of the table by a join), ``transform(key, value)`` per change, ``close`` at end.

    ``transform`` is called for deletes too (``value`` ``None``), as Kafka Streams calls it,
    and its result is the table's new value (``None`` deletes the row)."""

    context: ForwardingDisabledContext

    def init(self, context: ForwardingDisabledContext) -> None:
        self.context = context

    def transform(self, key: Any, value: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class ForwardingDisabledContext(FixedKeyProcessorContext):
    """A value transformer's context: the processor context's stores, time, metadata and
    punctuation; :meth:`forward` raises (the transformer's result is what is forwarded)."""

    def forward(self, record: Any, child_name: str | None = None) -> None:
        raise TopologyError(
            f"processor {self.processor_name!r}: a value transformer cannot forward records "
            f"(its transform() result is the table's new value); forward() is not supported "
            f"from this context")
