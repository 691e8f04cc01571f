"""The implementation of :class:`~kspark.dsl.api.KStream`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from kspark.dsl.api import BranchedKStream, GlobalKTable, KGroupedStream, KStream, KTable
from kspark.dsl.internals import stateless
from kspark.dsl.internals.branching import BranchedKStreamImpl, PrintAction
from kspark.dsl.internals.graph import (
    DslGraph,
    optional_serde,
    store_name_for,
)
from kspark.dsl.internals.joins import builders as joins
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.errors import TopologyError
from kspark.processor.fixed_key import FixedKeyAdapter, FixedKeyProcessor
from kspark.serdes import Serde


class KStreamImpl(KStream):
    """A stream: its node in the graph, its known serdes, and whether the key may have
    changed since the last repartition."""

    def __init__(self, builder: DslGraph, node: str, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, repartition_required: bool = False) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition_required = repartition_required

    @property
    def node_name(self) -> str:
        return self._node

    def _name(self, prefix: str, name: str | None) -> str:
        """``name``, or the next generated name: an index is taken either way, as Kafka
        Streams' ``Named`` takes it."""
        generated = self._builder.new_name(prefix)
        return self._given(name) or generated

    @staticmethod
    def _given(name: str | None) -> str | None:
        """``name``, checked (``process`` and ``process_values`` take no index for it, as
        Kafka Streams' do not)."""
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"a node name must be a non-empty string, got {name!r}")
        return name

    def _add(self, prefix: str, supplier: Any, *, key_changed: bool = False,
             keep_key_serde: bool = True, keep_value_serde: bool = True,
             name: str | None = None) -> KStream:
        name = self._name(prefix, name)
        self._builder.topology.add_processor(name, supplier, self._node)
        return KStreamImpl(
            self._builder, name,
            self._key_serde if keep_key_serde and not key_changed else None,
            self._value_serde if keep_value_serde else None,
            self._repartition_required or key_changed,
        )

    # -- stateless ---------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        return self._add("KSTREAM-FILTER-", partial(stateless.FilterProcessor, predicate, False),
                         name=name)

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None
                   ) -> KStream:
        return self._add("KSTREAM-FILTER-", partial(stateless.FilterProcessor, predicate, True),
                         name=name)

    def map_values(self, mapper: Callable[[Any], Any], name: str | None = None) -> KStream:
        return self._add("KSTREAM-MAPVALUES-", partial(stateless.MapValuesProcessor, mapper),
                         keep_value_serde=False, name=name)

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], name: str | None = None
            ) -> KStream:
        return self._add("KSTREAM-MAP-", partial(stateless.MapProcessor, mapper), key_changed=True,
                         keep_value_serde=False, name=name)

    def select_key(self, selector: Callable[[Any, Any], Any], name: str | None = None
                   ) -> KStream:
        return self._add("KSTREAM-KEY-SELECT-", partial(stateless.SelectKeyProcessor, selector),
                         key_changed=True, name=name)

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
                 name: str | None = None) -> KStream:
        return self._add("KSTREAM-FLATMAP-", partial(stateless.FlatMapProcessor, mapper),
                         key_changed=True, keep_value_serde=False, name=name)

    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]], name: str | None = None
                        ) -> KStream:
        return self._add("KSTREAM-FLATMAPVALUES-",
                         partial(stateless.FlatMapValuesProcessor, mapper), keep_value_serde=False,
                         name=name)

    def peek(self, action: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        return self._add("KSTREAM-PEEK-", partial(stateless.PeekProcessor, action), name=name)

    def merge(self, other: KStream, name: str | None = None) -> KStream:
        if not isinstance(other, KStreamImpl) or other._builder is not self._builder:
            raise ValueError("merge needs a KStream of the same StreamsBuilder")
        name = self._name("KSTREAM-MERGE-", name)
        self._builder.topology.add_processor(name, stateless.PassThroughProcessor, self._node,
                                             other._node)
        same_key = self._key_serde == other._key_serde
        same_value = self._value_serde == other._value_serde
        return KStreamImpl(self._builder, name, self._key_serde if same_key else None,
                       self._value_serde if same_value else None,
                       self._repartition_required or other._repartition_required)

    def repartition(self, name: str | None = None, partitions: int | None = None,
                    key_serde: Any = None, value_serde: Any = None,
                    partitioner: Callable[[Any, Any], int | None] | None = None) -> KStream:
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise ValueError(f"repartition's partitions must be a positive number, "
                             f"got {partitions!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"repartition's name must be a non-empty string, got {name!r}")
        key_serde = optional_serde(key_serde) or self._key_serde
        value_serde = optional_serde(value_serde) or self._value_serde
        prefix = name or self._builder.new_name("KSTREAM-REPARTITION-")
        source = self._builder.repartition(
            self._node, prefix, key_serde, value_serde, partitions=partitions,
            partitioner=partitioner)
        return KStreamImpl(self._builder, source, key_serde, value_serde, False)

    def split(self, prefix: str | None = None) -> BranchedKStream:
        return BranchedKStreamImpl(self._builder, self._node, prefix, self._key_serde,
                                   self._value_serde, self._repartition_required)

    def foreach(self, action: Callable[[Any, Any], Any], name: str | None = None) -> None:
        name = self._name("KSTREAM-FOREACH-", name)
        self._builder.topology.add_processor(name, partial(stateless.ForeachProcessor, action),
                                             self._node)

    def print(self, label: str | None = None, mapper: Callable[[Any, Any], Any] | None = None,
              file: Any = None, name: str | None = None) -> None:
        name = self._name("KSTREAM-PRINTER-", name)
        # the label defaults to the printed stream's node, as Kafka Streams' Printed does
        action = PrintAction(self._node if label is None else label, mapper, file)
        self._builder.topology.add_processor(name, partial(stateless.ForeachProcessor, action),
                                             self._node)

    def to(self, topic: str | Callable[[Any, Any, Any], str], key_serde: Any = None,
           value_serde: Any = None, partitioner: Callable[[Any, Any], int | None] | None = None,
           name: str | None = None) -> None:
        name = self._name("KSTREAM-SINK-", name)
        self._builder.topology.add_sink(
            name, topic, self._node,
            key_serde=optional_serde(key_serde) or self._key_serde,
            value_serde=optional_serde(value_serde) or self._value_serde,
            partitioner=partitioner,
        )

    def process_values(self, processor_supplier: Any, *store_names: str,
                       name: str | None = None) -> KStream:
        if isinstance(processor_supplier, FixedKeyProcessor) or not callable(processor_supplier):
            raise TopologyError(
                f"process_values needs a supplier of FixedKeyProcessor objects (a subclass or a "
                f"zero-argument factory), not {processor_supplier!r:.80}: each task needs its "
                f"own instance")
        name = self._given(name) or self._builder.new_name("KSTREAM-PROCESSVALUES-")
        topo = self._builder.topology
        topo.add_processor(name, partial(FixedKeyAdapter, processor_supplier), self._node)
        if store_names:
            topo.connect_processor_and_state_stores(name, *store_names)
        return KStreamImpl(self._builder, name, self._key_serde, None, self._repartition_required)

    def process(self, processor_supplier: Any, *store_names: str, name: str | None = None
                ) -> KStream:
        name = self._given(name) or self._builder.new_name("KSTREAM-PROCESSOR-")
        topo = self._builder.topology
        topo.add_processor(name, processor_supplier, self._node)
        if store_names:
            topo.connect_processor_and_state_stores(name, *store_names)
        return KStreamImpl(self._builder, name, None, None, True)

    # -- joins -----------------------------------------------------------------------------------
    @property
    def side(self) -> joins.StreamSide:
        """What a join needs of this stream."""
        return joins.StreamSide(self._node, self._key_serde, self._value_serde,
                                self._repartition_required)

    def _join(self, kind: str, other: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> KStream:
        if isinstance(other, KStreamImpl):
            if other._builder is not self._builder:
                raise ValueError("a join needs streams of the same StreamsBuilder")
            joiner, windows, stream_joined = arguments(
                f"{kind} join of two streams", args, kwargs,
                ("joiner", "join_windows", "stream_joined"), required=2)
            node, key_serde = joins.stream_stream_join(
                self._builder, self.side, other.side, joiner, windows, stream_joined, kind)
            return KStreamImpl(self._builder, node, key_serde, None, False)
        if kind == "outer":
            raise TypeError(f"outer_join needs a KStream, got {other!r}")
        if isinstance(other, KTable | GlobalKTable):
            return self._builder.stream_table_join(self, other, kind, args, kwargs)
        raise TypeError(f"{kind}_join needs a KStream, KTable or GlobalKTable, got {other!r}")

    def join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        return self._join("inner", other, args, kwargs)

    def left_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        return self._join("left", other, args, kwargs)

    def outer_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        return self._join("outer", other, args, kwargs)

    # -- grouping and tables -----------------------------------------------------------------
    def group_by_key(self, key_serde: Any = None, value_serde: Any = None,
                     name: str | None = None) -> KGroupedStream:
        key_serde = optional_serde(key_serde)
        return self._builder.new_grouped_stream(
            self._node, self._repartition_required, key_serde, optional_serde(value_serde),
            key_serde or (None if self._repartition_required else self._key_serde), name)

    def group_by(self, selector: Callable[[Any, Any], Any], key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> KGroupedStream:
        # Kafka Streams names the key selector after the grouping, as its repartition topic
        node = self._name("KSTREAM-KEY-SELECT-", name)
        self._builder.topology.add_processor(node, partial(stateless.SelectKeyProcessor, selector),
                                             self._node)
        key_serde = optional_serde(key_serde)
        return self._builder.new_grouped_stream(node, True, key_serde,
                                                optional_serde(value_serde), key_serde, name)

    def to_table(self, materialized: Materialized | str | None = None,
                 name: str | None = None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        name = self._name("KSTREAM-TOTABLE-", name)
        store = store_name_for(builder, m, "KSTREAM-TOTABLE-")
        parent = self._node
        if self._repartition_required:
            parent = builder.repartition(parent, name, None, None)
        view = builder.table_source(name, parent, store, m)
        return builder.new_ktable(name, view, queryable_store=m.name if m is not None else None,
                                  key_serde=None if self._repartition_required else self._key_serde,
                                  value_serde=self._value_serde)


def arguments(what: str, args: tuple[Any, ...], kwargs: dict[str, Any], names: tuple[str, ...],
               required: int) -> list[Any]:
    """``args`` and ``kwargs`` as the values of ``names`` (the first ``required`` needed)."""
    if len(args) > len(names):
        raise TypeError(f"{what} takes at most {len(names)} arguments after the other side, "
                        f"got {len(args)}")
    values = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"{what}: unexpected argument {name!r} (expected {', '.join(names)})")
        if name in values:
            raise TypeError(f"{what}: argument {name!r} given twice")
        values[name] = value
    missing = [n for n in names[:required] if values.get(n) is None]
    if missing:
        raise TypeError(f"{what} needs {', '.join(missing)}")
    return [values.get(n) for n in names]
