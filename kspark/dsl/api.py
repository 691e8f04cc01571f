"""The DSL's public types: KStream, KTable and their grouped and windowed forms.

These are interfaces (as Kafka Streams' ``kstream`` package): the builder returns their
implementations from :mod:`kspark.dsl.internals`, which make each other only through the
builder, so no module of the DSL imports another in a cycle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, overload

from kspark.dsl.joined import Joined, StreamJoined
from kspark.dsl.materialized import Materialized
from kspark.dsl.suppressed import Suppressed
from kspark.dsl.windowed_api import (  # re-exported: the DSL's public types live here
    CogroupedKStream,
    SessionWindowedCogroupedKStream,
    SessionWindowedKStream,
    TimeWindowedCogroupedKStream,
    TimeWindowedKStream,
)
from kspark.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

__all__ = ["BranchedKStream", "CogroupedKStream", "GlobalKTable", "KGroupedStream",
           "KGroupedTable", "KStream", "KTable", "SessionWindowedCogroupedKStream",
           "SessionWindowedKStream", "TimeWindowedCogroupedKStream", "TimeWindowedKStream"]

MaterializedLike = Materialized | str | None


class KStream(ABC):
    """An unbounded stream of records. Stateless operators keep records with null keys.
    ``name=`` names an operator's node as Kafka Streams' ``Named`` does (the index it would
    have had is taken all the same).

    After an operator that may change the key (``map``, ``select_key``, ``flat_map``,
    ``process``) the next key-based stateful operator reads the records back through a
    repartition topic."""

    @property
    @abstractmethod
    def node_name(self) -> str:
        """Name of the topology node this stream comes out of."""

    @abstractmethod
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Records for which ``predicate(key, value)`` is true."""

    @abstractmethod
    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None
                   ) -> KStream:
        """Records for which ``predicate(key, value)`` is false."""

    @abstractmethod
    def map_values(self, mapper: Callable[[Any], Any], name: str | None = None) -> KStream:
        """Each record with value ``mapper(value)``; the key is unchanged."""

    @abstractmethod
    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], name: str | None = None
            ) -> KStream:
        """Each record as ``mapper(key, value) -> (new_key, new_value)``."""

    @abstractmethod
    def select_key(self, selector: Callable[[Any, Any], Any], name: str | None = None
                   ) -> KStream:
        """Each record with key ``selector(key, value)``."""

    @abstractmethod
    def flat_map(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
                 name: str | None = None) -> KStream:
        """Zero or more records ``(new_key, new_value)`` per record."""

    @abstractmethod
    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]], name: str | None = None
                        ) -> KStream:
        """Zero or more records per record, each with one of ``mapper(value)`` and the key."""

    @abstractmethod
    def peek(self, action: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record and pass it on unchanged."""

    @abstractmethod
    def merge(self, other: KStream, name: str | None = None) -> KStream:
        """The records of this stream and ``other``, interleaved as they arrive."""

    @abstractmethod
    def repartition(self, name: str | None = None, partitions: int | None = None,
                    key_serde: Any = None, value_serde: Any = None,
                    partitioner: Callable[[Any, Any], int | None] | None = None) -> KStream:
        """This stream read back through a repartition topic of its own (Kafka Streams'
        KIP-221), ``<name>-repartition`` (``KSTREAM-REPARTITION-<index>-repartition`` without a
        name), with ``partitions`` partitions (default: as many as the source topics have) and
        ``partitioner(key, value)`` choosing each record's partition (default: Kafka's, on the
        serialized key). Records with null keys are dropped and counted unless a left or outer
        join downstream joins them (docs/semantics.md §9). The serdes default to the
        stream's."""

    @abstractmethod
    def split(self, prefix: str | None = None) -> BranchedKStream:
        """Branches of this stream (Kafka Streams' KIP-418), added with
        :meth:`BranchedKStream.branch`: each record goes to the first branch whose predicate
        holds, else to the default branch, if there is one. The branches are named
        ``prefix + name``; without a prefix, after the generated splitter name
        ``KSTREAM-BRANCH-<index>``."""

    @abstractmethod
    def foreach(self, action: Callable[[Any, Any], Any], name: str | None = None) -> None:
        """Call ``action(key, value)`` for each record (a terminal operation)."""

    @abstractmethod
    def print(self, label: str | None = None, mapper: Callable[[Any, Any], Any] | None = None,
              file: Any = None, name: str | None = None) -> None:
        """Print each record as ``[label]: key, value`` (``[label]: mapper(key, value)``), one
        line each, to ``file`` (standard output by default; on Spark, the executors'). The
        label defaults to the printed stream's node name (the printer is
        ``KSTREAM-PRINTER-<index>``, or ``name``)."""

    @abstractmethod
    def to(self, topic: str | Callable[[Any, Any, Any], str], key_serde: Any = None,
           value_serde: Any = None, partitioner: Callable[[Any, Any], int | None] | None = None,
           name: str | None = None) -> None:
        """Write every record to ``topic``, or to the topic ``topic(key, value, sink_context)``
        names for each record (a topic extractor, given a :class:`~kspark.records.SinkContext`;
        on Spark it must name one of the app's topics). Serdes default to the stream's known
        serdes, then to the application's defaults; ``partitioner(key, value)`` chooses each
        record's partition (default: Kafka's, on the serialized key)."""

    @abstractmethod
    def process(self, processor_supplier: Any, *store_names: str, name: str | None = None
                ) -> KStream:
        """Run a user :class:`~kspark.processor.Processor` (a zero-argument supplier or a
        Processor subclass) connected to the named stores (added with
        ``builder.add_state_store``). Returns the stream of what it forwards."""

    @abstractmethod
    def process_values(self, processor_supplier: Any, *store_names: str,
                       name: str | None = None) -> KStream:
        """Run a :class:`~kspark.processor.FixedKeyProcessor` (Kafka Streams' KIP-820; a
        subclass or a zero-argument factory) connected to the named stores: it forwards
        :class:`~kspark.processor.FixedKeyRecord` objects, whose key cannot change, so a
        key-based operator after it does not repartition (unless one before it had to)."""

    @abstractmethod
    def group_by_key(self, key_serde: Any = None, value_serde: Any = None,
                     name: str | None = None) -> KGroupedStream:
        """Group by the current key; repartitions only if an upstream operator may have
        changed the key, through ``<name>-repartition`` (Kafka Streams' ``Grouped.as``; else
        ``<store>-repartition``) with these serdes."""

    @abstractmethod
    def group_by(self, selector: Callable[[Any, Any], Any], key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> KGroupedStream:
        """Group by ``selector(key, value)``; always goes through a repartition topic."""

    @abstractmethod
    def to_table(self, materialized: MaterializedLike = None, name: str | None = None
                 ) -> KTable:
        """The stream read as upserts into a table (``None`` values delete; null keys are
        dropped and counted). Repartitions first if the key may have changed (through
        ``<name>-repartition`` with a ``name``)."""

    # -- joins (docs/semantics.md §9) -----------------------------------------------------------
    @overload
    def join(self, other: KStream, joiner: Callable[[Any, Any], Any],
             join_windows: JoinWindows, stream_joined: StreamJoined | None = None) -> KStream: ...

    @overload
    def join(self, other: KTable, joiner: Callable[[Any, Any], Any],
             joined: Joined | None = None) -> KStream: ...

    @overload
    def join(self, other: GlobalKTable, key_selector: Callable[[Any, Any], Any],
             joiner: Callable[[Any, Any], Any], name: str | None = None) -> KStream: ...

    @abstractmethod
    def join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """An inner join, by the type of ``other``:

        - a ``KStream``: ``join(other, joiner, join_windows, stream_joined=None)``, each pair of
          records of a key whose timestamps are within the windows gives
          ``joiner(value, other_value)`` at the later of the two timestamps;
        - a ``KTable``: ``join(table, joiner, joined=None)``, each record joins the table's
          value of its key (none: no result);
        - a ``GlobalKTable``: ``join(global_table, key_selector, joiner, name=None)``, each
          record joins the table's value of ``key_selector(key, value)``.

        Names as Kafka Streams': ``StreamJoined.with_name`` / ``with_store_name``,
        ``Joined.with_name`` and ``name=`` (``Named``) name the join's nodes, stores and
        repartition topics.

        Records with a null key or value are dropped and counted. A side whose key may have
        changed is repartitioned first."""

    @overload
    def left_join(self, other: KStream, joiner: Callable[[Any, Any], Any],
                  join_windows: JoinWindows,
                  stream_joined: StreamJoined | None = None) -> KStream: ...

    @overload
    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                  joined: Joined | None = None) -> KStream: ...

    @overload
    def left_join(self, other: GlobalKTable, key_selector: Callable[[Any, Any], Any],
                  joiner: Callable[[Any, Any], Any], name: str | None = None) -> KStream: ...

    @abstractmethod
    def left_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """As :meth:`join`, and every record of this stream that finds no partner gives
        ``joiner(value, None)``: with a stream, once its window has closed (stream time past
        its timestamp + after + grace); with a table, at once."""

    @abstractmethod
    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any],
                   join_windows: JoinWindows,
                   stream_joined: StreamJoined | None = None) -> KStream:
        """As the stream-stream :meth:`left_join`, and the other stream's records that find
        no partner give ``joiner(None, other_value)`` once their window has closed."""


class BranchedKStream(ABC):
    """The branches of a :meth:`KStream.split`, added in order; closed by
    :meth:`default_branch` or :meth:`no_default_branch`, which return them."""

    @abstractmethod
    def branch(self, predicate: Callable[[Any, Any], Any], name: str | None = None,
               chain: Callable[[KStream], KStream | None] | None = None) -> BranchedKStream:
        """A branch of the records for which ``predicate(key, value)`` holds (and no earlier
        branch's), named ``prefix + name``, or ``prefix`` + its position (from 1) without a
        name. ``chain(branch)`` (Kafka Streams' ``Branched.withFunction`` /
        ``withConsumer``) is applied to the branch: the stream it returns takes the branch's
        place in the result, and a chain that returns ``None`` leaves the branch out."""

    @abstractmethod
    def default_branch(self, name: str | None = None,
                       chain: Callable[[KStream], KStream | None] | None = None
                       ) -> dict[str, KStream]:
        """A last branch of the records no predicate took (named ``prefix + "0"`` without a
        name); returns every branch by name."""

    @abstractmethod
    def no_default_branch(self) -> dict[str, KStream]:
        """No more branches (records no predicate takes are dropped); returns every branch by
        name."""


class GlobalKTable(ABC):
    """A table whose whole contents every task sees (``StreamsBuilder.global_table``): a
    stream joins it by any key it selects, without repartitioning."""

    @property
    @abstractmethod
    def queryable_store_name(self) -> str | None:
        """The name of the table's store, if the user named it."""


class KTable(ABC):
    """A table keyed by the record key. Internally each update flows as
    ``Change(new, old)`` (``new is None``: the key was deleted); :meth:`to_stream` turns it
    back into a stream of new values."""

    @property
    @abstractmethod
    def node_name(self) -> str:
        """Name of the topology node this table's changes come out of."""

    @property
    @abstractmethod
    def queryable_store_name(self) -> str | None:
        """The name of the store to query this table with, if it was materialized under a
        name given by the user (as Kafka Streams: ``None`` for generated store names)."""

    @abstractmethod
    def filter(self, predicate: Callable[[Any, Any], Any],
               materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` is true; an update whose new value fails
        becomes a delete of the key (if its old value passed). With ``materialized`` naming a
        store the result is kept in it. ``name=`` names the node (here and in ``filter_not``,
        ``map_values``, ``to_stream``)."""

    @abstractmethod
    def filter_not(self, predicate: Callable[[Any, Any], Any],
                   materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` is false."""

    @abstractmethod
    def map_values(self, mapper: Callable[[Any], Any],
                   materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Each row's value as ``mapper(value)`` (applied to new and old values alike)."""

    @abstractmethod
    def transform_values(self, transformer_supplier: Any, *store_names: str,
                         materialized: MaterializedLike = None,
                         name: str | None = None) -> KTable:
        """Each change's new value (a delete's too) through the ``ValueTransformerWithKey``
        ``transformer_supplier()`` makes per task, which may use the stores named; kept in a
        store only when ``materialized`` names one (docs/semantics.md §10.6)."""

    @abstractmethod
    def to_stream(self, mapper: Callable[[Any, Any], Any] | None = None,
                  name: str | None = None) -> KStream:
        """The stream of updates: each change's new value (``None`` for a delete); with
        ``mapper``, keyed by ``mapper(key, value)`` (a key that may have changed: the next
        key-based operator repartitions)."""

    @abstractmethod
    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]], key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> KGroupedTable:
        """Re-group rows by ``selector(key, value) -> (group_key, group_value)``; the
        aggregation reads the re-keyed changes from a repartition topic (``<name>-repartition``
        with a ``name``, Kafka Streams' ``Grouped.as``, which also names the selector)."""

    # -- joins (docs/semantics.md §9.4, §9.5) --------------------------------------------------
    @abstractmethod
    def join(self, other: KTable, joiner: Callable[[Any, Any], Any],
             materialized: MaterializedLike = None, *,
             foreign_key_extractor: Callable[[Any], Any] | None = None,
             name: str | None = None) -> KTable:
        """The table of ``joiner(value, other_value)`` for every key both tables hold, kept
        current as either changes (deletes included). With ``foreign_key_extractor``, each row
        joins the row of ``other`` whose key is ``foreign_key_extractor(value)``; the result
        is keyed by this table's key. ``name=`` names the join's nodes as Kafka Streams'
        ``Named`` (on the primary key: ``<name>`` merges ``<name>-join-this`` and
        ``<name>-join-other``) or ``TableJoined.as`` (on a foreign key: ``<name>-result``,
        ``<name>-subscription-registration-topic``, ``<name>-subscription-store``, ...)."""

    @abstractmethod
    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                  materialized: MaterializedLike = None, *,
                  foreign_key_extractor: Callable[[Any], Any] | None = None,
                  name: str | None = None) -> KTable:
        """As :meth:`join`, and every row of this table without a partner gives
        ``joiner(value, None)``."""

    @abstractmethod
    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                   materialized: MaterializedLike = None, *, name: str | None = None) -> KTable:
        """As :meth:`left_join`, and every row of ``other`` without a partner gives
        ``joiner(None, other_value)``."""

    @abstractmethod
    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold back updates per :class:`~kspark.dsl.suppressed.Suppressed`: until a window
        closes (windowed tables only) or for a time limit, in a bounded or unbounded buffer.

        The node is ``KTABLE-SUPPRESS-<index>`` with store ``KTABLE-SUPPRESS-STATE-STORE-<index>``,
        or ``<name>`` / ``<name>-store`` for ``Suppressed.with_name(name)``."""


class KGroupedStream(ABC):
    """Records grouped by key. Aggregations read re-keyed records back from a repartition
    topic ``<store name>-repartition`` (serialized with the grouping's serdes, else pickled)."""

    @property
    @abstractmethod
    def node_name(self) -> str:
        """Name of the topology node whose records this grouping aggregates."""

    @abstractmethod
    def count(self, materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """The number of records per key (null keys and values are dropped and counted).
        ``name=`` names the aggregation's node here and in ``reduce`` and ``aggregate``."""

    @abstractmethod
    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Per key: the first value, then ``reducer(agg, value)`` for each next value."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Per key: ``aggregator(key, value, agg)`` starting from ``initializer()``."""

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream[KTable]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows
                    ) -> TimeWindowedKStream[KTable]: ...

    @abstractmethod
    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedKStream[KTable] | TimeWindowedKStream[KTable]:
        """Aggregate per key and window: session windows give a
        :class:`SessionWindowedKStream`, time and sliding windows a
        :class:`TimeWindowedKStream`."""

    @abstractmethod
    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]
                ) -> CogroupedKStream[KTable, KGroupedStream]:
        """This grouped stream as the first of a cogroup (Kafka Streams' KIP-150): one
        aggregate that several grouped streams update, each with its own
        ``aggregator(key, value, agg)``, kept in one store."""





class KGroupedTable(ABC):
    """The rows of a table re-keyed by ``KTable.group_by``. Every aggregation reads the
    re-keyed changes from the repartition topic ``<store name>-repartition``; each upstream
    update first subtracts the old value, then adds the new one (docs/semantics.md §4)."""

    @property
    @abstractmethod
    def node_name(self) -> str:
        """Name of the topology node whose records this grouping aggregates."""

    @abstractmethod
    def count(self, materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """The number of rows per group key. ``name=`` names the aggregation's node and its
        repartition topic's sink and source (``<name>-sink``, ``<name>-source``), here and in
        ``reduce`` and ``aggregate``."""

    @abstractmethod
    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Per group key: the first value as is, then ``adder(agg, value)`` for each added
        row and ``subtractor(agg, value)`` for each removed one."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> KTable:
        """Per group key: ``subtractor(key, old_value, agg)`` for each removed row, then
        ``adder(key, new_value, agg)`` for each added one, from ``initializer()`` when
        nothing is stored for the key."""

