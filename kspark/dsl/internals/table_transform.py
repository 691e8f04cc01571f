"""``KTable.transform_values``: a table whose values are a :class:`ValueTransformerWithKey`'s
results, kept in a store when materialized by name, else computed again on each lookup (with a
transformer of the lookup's own), as Kafka Streams' ``KTableTransformValues``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.internals.graph import DslGraph, key_value_store_builder, optional_serde
from kspark.dsl.internals.processors import TableWriter
from kspark.dsl.internals.table_views import (
    DerivedView,
    OldValues,
    StoreView,
    TableView,
    ValueGetter,
    ValueGetterSupplier,
)
from kspark.dsl.materialized import Materialized
from kspark.errors import TopologyError
from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.value_transformer import ForwardingDisabledContext, ValueTransformerWithKey
from kspark.records import Record, ValueAndTimestamp, change, event_time

TransformerSupplier = Callable[[], ValueTransformerWithKey]

#: the timestamp of a looked-up value the parent table does not have (Kafka Streams' UNKNOWN)
UNKNOWN_TIMESTAMP = -1


def _transformer(supplier: TransformerSupplier, context: ProcessorContext
                 ) -> ValueTransformerWithKey:
    transformer = supplier()
    if not isinstance(transformer, ValueTransformerWithKey):
        raise TopologyError(f"KTable.transform_values needs a supplier of ValueTransformerWithKey "
                            f"objects, got {transformer!r:.80}")
    transformer.init(ForwardingDisabledContext(context))
    return transformer


class TransformValuesProcessor(Processor):
    """Each change's new value through the transformer (a delete too); the old value from the
    store when materialized, else through the transformer, when old values are sent."""

    def __init__(self, supplier: TransformerSupplier, old: OldValues,
                 store_name: str | None) -> None:
        self.supplier, self.old, self.store_name = supplier, old, store_name
        self.writer: TableWriter | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.transformer = _transformer(self.supplier, context)
        if self.store_name is not None:
            self.writer = TableWriter(context, context.get_state_store(self.store_name),
                                      self.old)

    def process(self, record: Record) -> None:
        update = record.value
        key = record.key
        new = self.transformer.transform(key, update.new_value)
        writer = self.writer
        if writer is not None:
            old = writer.current(key) if self.old.enabled else None
            writer.put(key, new, old, event_time(record))
            return
        old = self.transformer.transform(key, update.old_value) if self.old.enabled else None
        self.context.forward(record.with_value(change(new, old, update.is_latest)))

    def close(self) -> None:
        self.transformer.close()


class _TransformedGetter:
    def __init__(self, parent: ValueGetter, transformer: ValueTransformerWithKey) -> None:
        self.parent, self.transformer = parent, transformer
        self.versioned = parent.versioned

    def _transformed(self, key: Any, found: ValueAndTimestamp | None
                     ) -> ValueAndTimestamp | None:
        # a row the parent lacks is transformed too (its value None), as Kafka Streams does
        value = self.transformer.transform(key, None if found is None else found.value)
        if value is None:
            return None
        return ValueAndTimestamp(value, UNKNOWN_TIMESTAMP if found is None else found.timestamp)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self._transformed(key, self.parent.get(key))

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        return self._transformed(key, self.parent.get_as_of(key, timestamp))


class TransformedGetterSupplier(ValueGetterSupplier):
    """The parent's values through a transformer of the looking-up processor's own."""

    def __init__(self, parent: ValueGetterSupplier, supplier: TransformerSupplier) -> None:
        self.parent, self.supplier = parent, supplier

    @property
    def store_names(self) -> tuple[str, ...]:
        return self.parent.store_names

    def make(self, context: ProcessorContext) -> ValueGetter:
        return _TransformedGetter(self.parent.make(context), _transformer(self.supplier, context))


class TransformedView(DerivedView):
    """A transformed table without a store: lookups go through the parent and a transformer."""

    def __init__(self, old: OldValues, parent: TableView, supplier: TransformerSupplier) -> None:
        super().__init__(old, parent, lambda key, value: value)
        self.supplier = supplier

    def getter(self) -> ValueGetterSupplier:
        return TransformedGetterSupplier(self.parent.getter(), self.supplier)


def transform_values(graph: DslGraph, parent_node: str, parent: TableView,
                     supplier: TransformerSupplier, store_names: tuple[str, ...],
                     materialized: Materialized | None, name: str | None
                     ) -> tuple[str, TableView, str | None]:
    """Add the node; its name, its view and its store (only a ``Materialized`` with a store
    name keeps one, and an unnamed one takes no store index, as in Kafka Streams)."""
    if isinstance(supplier, ValueTransformerWithKey) or not callable(supplier):
        raise TopologyError(
            f"transform_values needs a supplier of ValueTransformerWithKey objects (a subclass "
            f"or a zero-argument factory), not {supplier!r:.80}: each task needs its own")
    store = materialized.name if materialized is not None else None
    generated = graph.new_name("KTABLE-TRANSFORMVALUES-")  # taken when named too, as Kafka's
    node = name or generated
    old = OldValues()
    topo = graph.topology
    topo.add_processor(node, partial(TransformValuesProcessor, supplier, old, store),
                       parent_node)
    view: TableView
    if store is not None:
        topo.add_state_store(key_value_store_builder(store, materialized), node)
        view = StoreView(old, store)
    else:
        view = TransformedView(old, parent, supplier)
    if store_names:
        topo.connect_processor_and_state_stores(node, *store_names)
    return node, view, store


def value_serde_of(materialized: Materialized | None) -> Any:
    """The result's value serde: the ``Materialized``'s, else unknown (the values changed)."""
    return None if materialized is None else optional_serde(materialized.value_serde)
