"""How each join is added to the graph, with Kafka Streams' node and store names.

A stream-stream join (``KStreamImplJoin`` in Kafka Streams) is five nodes: each side's windowed
processor (``KSTREAM-WINDOWED-``), each side's join processor (``KSTREAM-JOINTHIS-`` /
``KSTREAM-JOINOTHER-``, or ``KSTREAM-OUTERTHIS-`` / ``KSTREAM-OUTEROTHER-`` on a side whose
partner is outer) and a merge (``KSTREAM-MERGE-``); its stores are named after the join
processors (``<KSTREAM-JOINTHIS-n>-store``, the shared outer store
``KSTREAM-OUTERSHARED-<n>-store``), or after ``StreamJoined.store_name``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from kspark.dsl.internals.graph import DslGraph, key_value_store_builder, store_name_for
from kspark.dsl.internals.joins.fk_wire import ResponseSerde, SubscriptionSerde
from kspark.dsl.internals.joins.foreign_key import (
    ForeignTableJoinProcessor,
    ResponseJoinProcessor,
    SubscriptionJoinProcessor,
    SubscriptionReceiveProcessor,
    SubscriptionSendProcessor,
    response_partition,
)
from kspark.dsl.internals.joins.stream_stream import JoinWindowProcessor, StreamJoinProcessor
from kspark.dsl.internals.joins.stream_table import StreamTableJoinProcessor
from kspark.dsl.internals.joins.table_table import (
    SIDES,
    JoinedGetterSupplier,
    TableJoinMergeProcessor,
    TableTableJoinProcessor,
    reversed_joiner,
)
from kspark.dsl.internals.stateless import PassThroughProcessor
from kspark.dsl.internals.table_views import (
    JoinedView,
    OldValues,
    StoreGetterSupplier,
    TableView,
    ValueGetterSupplier,
)
from kspark.dsl.joined import Joined, StreamJoined
from kspark.dsl.materialized import Materialized
from kspark.errors import TopologyError
from kspark.serdes import Bytes, Pickle, Serde, as_serde
from kspark.state.builders import StoreBuilder, Stores
from kspark.state.join_stores import (
    BufferedRecordSerde,
    LeftOrRightValuesSerde,
    TimestampedKeyAndJoinSideSerde,
)
from kspark.windows import JoinWindows

#: join kinds: (this side outer, other side outer)
KINDS = {"inner": (False, False), "left": (True, False), "outer": (True, True)}


class StreamSide(NamedTuple):
    """What a join needs of one of its streams."""

    node: str
    key_serde: Serde | None
    value_serde: Serde | None
    repartition_required: bool


def _serde(given: Any, known: Serde | None) -> Serde | None:
    return as_serde(given) if given is not None else known


def repartitioned(graph: DslGraph, side: StreamSide, name: str, key_serde: Serde | None,
                  value_serde: Serde | None) -> StreamSide:
    """``side`` read back through the repartition topic ``<name>-repartition`` if its key may
    have changed (null keys kept for joins that join them: ``DslGraph.relax_null_keys``)."""
    if not side.repartition_required:
        return side
    source = graph.repartition(side.node, name, key_serde, value_serde)
    return StreamSide(source, key_serde, value_serde, False)


def stream_stream_join(
    graph: DslGraph,
    this: StreamSide,
    other: StreamSide,
    joiner: Callable[[Any, Any], Any],
    windows: JoinWindows,
    stream_joined: StreamJoined | None,
    kind: str,
) -> tuple[str, Serde | None]:
    """Add a stream-stream join of ``kind`` to the graph; return the merge node and the
    result's key serde."""
    if not isinstance(windows, JoinWindows):
        raise TypeError(f"a stream-stream join needs JoinWindows, got {windows!r}")
    if not callable(joiner):
        raise TypeError(f"joiner must be callable, got {joiner!r}")
    sj = stream_joined or StreamJoined()
    if not isinstance(sj, StreamJoined):
        raise TypeError(f"stream_joined must be a StreamJoined, got {sj!r}")
    this_outer, other_outer = KINDS[kind]
    key_serde = _serde(sj.key_serde, this.key_serde)
    this_values = _serde(sj.value_serde, this.value_serde)
    other_values = _serde(sj.other_value_serde, other.value_serde)
    this = repartitioned(graph, this, f"{sj.name}-left" if sj.name else this.node,
                         key_serde, this_values)
    other = repartitioned(graph, other, f"{sj.name}-right" if sj.name else other.node,
                          _serde(sj.key_serde, other.key_serde), other_values)
    topo = graph.topology

    def name(suffix: str, prefix: str) -> str:
        return _named_or_new(graph, sj.name, suffix, prefix)

    this_windowed = name("-this-windowed", "KSTREAM-WINDOWED-")
    other_windowed = name("-other-windowed", "KSTREAM-WINDOWED-")
    this_generated = graph.new_name("KSTREAM-OUTERTHIS-" if other_outer else "KSTREAM-JOINTHIS-")
    other_generated = graph.new_name(
        "KSTREAM-OUTEROTHER-" if this_outer else "KSTREAM-JOINOTHER-")
    this_suffix = "-outer-this-join" if other_outer else "-this-join"
    other_suffix = "-outer-other-join" if this_outer else "-other-join"
    this_join = f"{sj.name}{this_suffix}" if sj.name else this_generated
    other_join = f"{sj.name}{other_suffix}" if sj.name else other_generated
    merge = name("-merge", "KSTREAM-MERGE-")

    base = sj.store_name
    this_store = f"{base}{this_suffix}-store" if base else f"{this_generated}-store"
    other_store = f"{base}{other_suffix}-store" if base else f"{other_generated}-store"
    outer_store = outer_keys = None
    if this_outer:
        shared = "-outer-shared-join" if other_outer else "-left-shared-join"
        digits = this_generated[len("KSTREAM-OUTERTHIS-" if other_outer
                                    else "KSTREAM-JOINTHIS-"):]
        outer_store = (f"{base}{shared}-store" if base
                       else f"KSTREAM-OUTERSHARED-{digits}-store")
        outer_keys = TimestampedKeyAndJoinSideSerde(key_serde)

    this_stored, other_stored = _stored(this_values), _stored(other_values)
    topo.add_processor(this_windowed, partial(JoinWindowProcessor, this_store, this_stored, merge),
                       this.node)
    topo.add_processor(other_windowed,
                       partial(JoinWindowProcessor, other_store, other_stored, merge), other.node)
    side = partial(StreamJoinProcessor, windows=windows, joiner=joiner, outer_store=outer_store,
                   outer_keys=outer_keys, shared=merge)
    topo.add_processor(this_join, partial(side, left=True, outer=this_outer,
                                          other_outer=other_outer,
                                          other_store=other_store, this_values=this_stored,
                                          other_values=other_stored), this_windowed)
    topo.add_processor(other_join, partial(side, left=False, outer=other_outer,
                                           other_outer=this_outer,
                                           other_store=this_store, this_values=other_stored,
                                           other_values=this_stored), other_windowed)
    topo.add_processor(merge, PassThroughProcessor, this_join, other_join)
    if this_outer:  # left and outer joins join records with null keys
        graph.relax_null_keys(this_join, other_join)
    topo.add_state_store(_window_store(this_store, windows, key_serde, sj), this_windowed,
                         other_join)
    topo.add_state_store(_window_store(other_store, windows, key_serde, sj), other_windowed,
                         this_join)
    if outer_store is not None:
        topo.add_state_store(
            StoreBuilder(outer_store, "list_value", logging=sj.logging, key_serde=outer_keys,
                         value_serde=LeftOrRightValuesSerde()),
            this_join, other_join)
    topo.copartition(this.node, other.node)
    return merge, key_serde


def _stored(value_serde: Serde | None) -> Serde:
    """The serde of a join side's values in its window store (a store's default: Pickle)."""
    return Pickle() if value_serde is None else value_serde


def _window_store(name: str, windows: JoinWindows, key_serde: Serde | None,
                  sj: StreamJoined) -> StoreBuilder:
    """A join side's window store: duplicates retained, kept for the windows' size + grace;
    its values are their serialized bytes (:class:`JoinWindowProcessor`), logged as they are."""
    return Stores.window_store(name, windows.default_retention_ms, windows.size_ms,
                               retain_duplicates=True, key_serde=key_serde,
                               value_serde=Bytes(), logging=sj.logging)


def stream_table_join(
    graph: DslGraph,
    stream: StreamSide,
    getter: ValueGetterSupplier,
    table_node: str | None,
    joiner: Callable[[Any, Any], Any],
    kind: str,
    joined: Joined | None = None,
    key_selector: Callable[[Any, Any], Any] | None = None,
    versioned: bool = False,
) -> str:
    """Add a join of ``stream`` with a table (``table_node``, read through ``getter``;
    ``versioned``: lookups as of a time) or, with ``key_selector``, a global table; return the
    join's node."""
    if not callable(joiner):
        raise TypeError(f"joiner must be callable, got {joiner!r}")
    if key_selector is not None and not callable(key_selector):
        raise TypeError(f"key_selector must be callable, got {key_selector!r}")
    j = joined or Joined()
    if not isinstance(j, Joined):
        raise TypeError(f"joined must be a Joined, got {j!r}")
    if j.grace is not None and not versioned:
        raise TopologyError("KTable must be versioned to use a grace period in a stream-table "
                            "join (Joined.grace; Materialized(versioned_history=...))")
    left = kind == "left"
    if key_selector is None:  # a table: co-partitioned with the stream, repartitioned if need be
        stream = repartitioned(graph, stream, j.name or stream.node,
                               _serde(j.key_serde, stream.key_serde),
                               _serde(j.value_serde, stream.value_serde))
        prefix = "KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-"
    else:
        prefix = "KSTREAM-LEFTJOIN-"  # Kafka Streams names both global joins so
    generated = graph.new_name(prefix)  # taken with a name too, as Kafka Streams does
    name = j.name or generated
    buffer = None if j.grace is None else f"{name}-Buffer"
    topo = graph.topology
    key_serde = _serde(j.key_serde, stream.key_serde)
    topo.add_processor(name, partial(StreamTableJoinProcessor, getter, joiner, left,
                                     key_selector, buffer, j.grace_ms or 0, key_serde,
                                     tuple(topo.internal_topics)), stream.node)
    if buffer is not None:  # the processor's own store first, then the table's (the order of
        # the processor's stores in Kafka Streams' description, where two share a hash bucket)
        topo.add_state_store(StoreBuilder(
            buffer, "time_ordered_buffer", key_serde=Bytes(),
            value_serde=BufferedRecordSerde(_serde(j.value_serde, stream.value_serde))), name)
    topo.connect_processor_and_state_stores(name, *getter.store_names)
    if left:  # a left join joins records with null keys
        graph.relax_null_keys(name)
    if table_node is not None:
        topo.copartition(stream.node, table_node)
    return name


class TableSide(NamedTuple):
    """What a table-table join needs of one of its tables."""

    node: str
    view: TableView


def table_table_join(
    graph: DslGraph,
    this: TableSide,
    other: TableSide,
    joiner: Callable[[Any, Any], Any],
    kind: str,
    materialized: Materialized | None,
    name: str | None = None,
) -> tuple[str, TableView, str | None]:
    """Add a table-table join of ``kind`` on the primary key (``name``: its merge node, the
    join processors ``<name>-join-this`` / ``-join-other``); return the merge node, the
    result's view and its store (``None``: not materialized)."""
    if not callable(joiner):
        raise TypeError(f"joiner must be callable, got {joiner!r}")
    this_kind, other_kind = SIDES[kind]
    # a left or outer join subtracts what it joined before: it needs its tables' old values
    if kind in ("left", "outer"):
        this.view.enable_sending_old_values(True)
    if kind == "outer":
        other.view.enable_sending_old_values(True)
    this_getter, other_getter = this.view.getter(), other.view.getter()
    store = None if materialized is None else store_name_for(graph, materialized,
                                                             "KTABLE-MERGE-")
    merge = _named_or_new(graph, name, "", "KTABLE-MERGE-")
    this_join = _named_or_new(graph, name, "-join-this", "KTABLE-JOINTHIS-")
    other_join = _named_or_new(graph, name, "-join-other", "KTABLE-JOINOTHER-")
    this_old, other_old, merge_old = OldValues(), OldValues(), OldValues()
    topo = graph.topology
    topo.add_processor(this_join, partial(TableTableJoinProcessor, this_kind, other_getter,
                                          joiner, this_old), this.node)
    topo.connect_processor_and_state_stores(this_join, *other_getter.store_names)
    topo.add_processor(other_join, partial(TableTableJoinProcessor, other_kind, this_getter,
                                           reversed_joiner(joiner), other_old), other.node)
    topo.connect_processor_and_state_stores(other_join, *this_getter.store_names)
    topo.add_processor(merge, partial(TableJoinMergeProcessor, merge_old, store),
                       this_join, other_join)
    topo.copartition(this.node, other.node)
    olds = (this_old, other_old)

    def enable_upstream() -> None:
        this.view.enable_sending_old_values(True)
        other.view.enable_sending_old_values(True)

    getter: Callable[[], ValueGetterSupplier]
    if store is not None:
        topo.add_state_store(key_value_store_builder(store, materialized), merge)
        getter = partial(StoreGetterSupplier, store)
    else:
        def getter() -> ValueGetterSupplier:
            return JoinedGetterSupplier(kind, this.view.getter(), other.view.getter(), joiner)
    return merge, JoinedView(merge_old, olds, enable_upstream, getter), store


def _named_or_new(graph: DslGraph, name: str | None, suffix: str, prefix: str) -> str:
    """``name + suffix``, or the next generated name: its index is taken either way (Kafka
    Streams' ``NamedInternal.suffixWithOrElseGet``)."""
    generated = graph.new_name(prefix)
    return generated if name is None else name + suffix


class ForeignKeyTables(NamedTuple):
    """What a foreign-key join needs of its two tables."""

    left: TableSide
    right: TableSide
    left_key_serde: Serde | None
    left_value_serde: Serde | None
    right_key_serde: Serde | None
    right_value_serde: Serde | None


def foreign_key_join(
    graph: DslGraph,
    tables: ForeignKeyTables,
    extractor: Callable[[Any], Any],
    joiner: Callable[[Any, Any], Any],
    kind: str,
    materialized: Materialized | None,
    name: str | None = None,
) -> tuple[str, TableView]:
    """Add a foreign-key join (inner or left) with Kafka Streams' nodes, topics and stores
    (:mod:`.foreign_key`), named after ``name`` if given (``TableJoined.as``); return its
    result node and view."""
    if kind not in ("inner", "left"):
        raise TopologyError("a foreign-key join is an inner or a left join")
    for what, fn in (("foreign_key_extractor", extractor), ("joiner", joiner)):
        if not callable(fn):
            raise TypeError(f"{what} must be callable, got {fn!r}")
    left, right = tables.left, tables.right
    # a row that changes its foreign key unsubscribes from the old one: it needs old values
    right.view.enable_sending_old_values(True)
    left.view.enable_sending_old_values(True)
    left_getter, right_getter = left.view.getter(), right.view.getter()
    pk, fk = tables.left_key_serde, tables.right_key_serde
    def named(suffix: str, prefix: str) -> str:
        return _named_or_new(graph, name, suffix, prefix)

    fk_prefix = "KTABLE-FK-JOIN-SUBSCRIPTION-"
    registration = named("-subscription-registration", fk_prefix + "REGISTRATION-") + "-topic"
    send = named("-subscription-registration-processor", fk_prefix + "REGISTRATION-")
    registration_sink = named("-subscription-registration-sink", "KTABLE-SINK-")
    registration_source = named("-subscription-registration-source", "KTABLE-SOURCE-")
    store = named("-subscription-store", fk_prefix + "STATE-STORE-")
    receive = named("-subscription-receive", fk_prefix + "PROCESSOR-")
    answer = named("-subscription-join-foreign", fk_prefix + "PROCESSOR-")
    foreign = named("-foreign-join-subscription", fk_prefix + "PROCESSOR-")
    response = named("-subscription-response", fk_prefix + "RESPONSE-") + "-topic"
    response_sink = named("-subscription-response-sink", "KTABLE-SINK-")
    response_source = named("-subscription-response-source", "KTABLE-SOURCE-")
    resolve = named("-subscription-response-resolver", fk_prefix + "RESPONSE-RESOLVER-PROCESSOR-")
    output = named("-result", "KTABLE-FK-JOIN-OUTPUT-")
    result_store = store_name_for(graph, materialized, "KTABLE-FK-JOIN-OUTPUT-")
    subscriptions = SubscriptionSerde(pk)
    responses = ResponseSerde(tables.right_value_serde)
    topo = graph.topology
    topo.add_processor(send, partial(SubscriptionSendProcessor, extractor, kind == "left", fk,
                                     tables.left_value_serde), left.node)
    topo.add_sink(registration_sink, registration, send, key_serde=fk, value_serde=subscriptions)
    topo.add_source(registration_source, registration, fk, subscriptions)
    topo.add_processor(receive, partial(SubscriptionReceiveProcessor, store, fk, pk),
                       registration_source)
    topo.add_state_store(Stores.key_value_store(store, key_serde=Bytes(),
                                                value_serde=subscriptions), receive)
    topo.add_processor(answer, partial(SubscriptionJoinProcessor, right_getter), receive)
    topo.connect_processor_and_state_stores(answer, *right_getter.store_names)
    topo.add_processor(foreign, partial(ForeignTableJoinProcessor, store, fk, pk), right.node)
    topo.connect_processor_and_state_stores(foreign, store)
    topo.add_sink(response_sink, response, answer, foreign, key_serde=pk, value_serde=responses,
                  partitioner=response_partition)
    topo.add_source(response_source, response, pk, responses)
    topo.add_processor(resolve, partial(ResponseJoinProcessor, left_getter, joiner,
                                        kind == "left", tables.left_value_serde),
                       response_source)
    topo.connect_processor_and_state_stores(resolve, *left_getter.store_names)
    for topic in (registration, response):
        topo.internal_topics[topic] = None
    # on Spark the registrations reach the right side's stage in the next micro-batch (the
    # right side's answers go back to the left side's stage within one)
    topo.feedback_topics.add(registration)
    topo.copartition(registration_source, right.node)
    topo.copartition(response_source, left.node)
    return output, graph.table_source(output, resolve, result_store, materialized)
