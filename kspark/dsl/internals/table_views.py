"""What a KTable's node offers the operators after it, as Kafka Streams models it.

- **Old values.** A table's changes are ``Change(new, old)``; the old value is computed and
  sent only when an operator downstream needs it (``KTable.group_by``, ``suppress``, a left or
  outer table-table join, a filter whose parent can send them cheaply), Kafka Streams'
  ``enableSendingOldValues``. Otherwise ``old`` is ``None``, which is visible: a filter that
  cannot tell that a dropped row was already absent forwards a tombstone for it. Each table
  processor holds an :class:`OldValues` flag that the graph sets while it is built.
- **Value getters.** A join looks up the current value of a key in a table: in the table's
  store when it has one, else computed from its parent's getter (a filter or ``map_values``
  applies itself on the way). :class:`ValueGetterSupplier` describes the lookup and the stores
  it reads; a task builds the :class:`ValueGetter` from its stores.
- **Materialization.** A table read with ``builder.table`` without a store name keeps no store
  until something needs one (a value getter, or old values with ``force``); then its store is
  added to the topology (:class:`SourceView`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

from kspark.processor.api import ProcessorContext
from kspark.records import ValueAndTimestamp


class OldValues:
    """Whether a table processor computes and forwards old values (set while building)."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    def __getstate__(self) -> bool:
        return self.enabled

    def __setstate__(self, state: bool) -> None:
        self.enabled = state

    def __repr__(self) -> str:
        return f"OldValues({self.enabled})"


class ValueGetter(Protocol):
    """The current value of a key in a table, with the timestamp that wrote it; a versioned
    table's also as of a time."""

    versioned: bool

    def get(self, key: Any) -> ValueAndTimestamp | None: ...

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        """The value valid at ``timestamp`` (a table that is not versioned: its current)."""


class ValueGetterSupplier(ABC):
    """How a task looks up a table's values: the stores it reads and the getter over them."""

    @property
    @abstractmethod
    def store_names(self) -> tuple[str, ...]:
        """The stores a processor using this getter must be connected to."""

    @abstractmethod
    def make(self, context: ProcessorContext) -> ValueGetter:
        """The getter, over the stores of ``context``'s task."""


class _LatestGetter:
    """A getter of a table that is not versioned: as of any time, its current value."""

    versioned = False

    def __init__(self, store: Any) -> None:
        self.store = store

    def get(self, key: Any) -> ValueAndTimestamp | None:
        raise NotImplementedError

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        return self.get(key)


class _StoreGetter(_LatestGetter):
    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.get = store.get_with_timestamp  # type: ignore[method-assign]  # one call a lookup


class _VersionedGetter:
    versioned = True

    def __init__(self, store: Any) -> None:
        self.store = store
        self.get = store.get_with_timestamp

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        found = self.store.get(key, timestamp)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)


class StoreGetterSupplier(ValueGetterSupplier):
    """The values of a table kept in a key-value store."""

    def __init__(self, store: str) -> None:
        self.store = store

    @property
    def store_names(self) -> tuple[str, ...]:
        return (self.store,)

    def make(self, context: ProcessorContext) -> ValueGetter:
        store = context.get_state_store(self.store)
        if store.kind == "versioned":
            return _VersionedGetter(store)
        return _StoreGetter(store)


class _MappedGetter:
    def __init__(self, parent: ValueGetter, compute: Callable[[Any, Any], Any]) -> None:
        self.parent, self.compute = parent, compute
        self.versioned = parent.versioned

    def _mapped(self, key: Any, found: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if found is None:
            return None
        value = self.compute(key, found.value)
        return None if value is None else ValueAndTimestamp(value, found.timestamp)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self._mapped(key, self.parent.get(key))

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        return self._mapped(key, self.parent.get_as_of(key, timestamp))


class MappedGetterSupplier(ValueGetterSupplier):
    """A parent's values, each passed through ``compute(key, value)`` (``None``: absent), as a
    filter or ``map_values`` without a store of its own computes them."""

    def __init__(self, parent: ValueGetterSupplier, compute: Callable[[Any, Any], Any]) -> None:
        self.parent, self.compute = parent, compute

    @property
    def store_names(self) -> tuple[str, ...]:
        return self.parent.store_names

    def make(self, context: ProcessorContext) -> ValueGetter:
        return _MappedGetter(self.parent.make(context), self.compute)


class TableView(ABC):
    """A KTable's node as the operators after it see it (see the module)."""

    def __init__(self, old: OldValues) -> None:
        self.old = old

    @abstractmethod
    def getter(self) -> ValueGetterSupplier:
        """How to look up the table's current values (may materialize the table)."""

    @abstractmethod
    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        """Ask the node to send old values; whether it does (it may need to materialize, which
        only ``force_materialization`` allows)."""

    @property
    def versioned(self) -> bool:
        """Whether lookups can ask for a value as of a time (a versioned table's)."""
        return False


class StoreView(TableView):
    """A table kept in a store (an aggregation, a materialized filter, map_values or join):
    it can always send old values."""

    def __init__(self, old: OldValues, store: str,
                 getter: ValueGetterSupplier | None = None) -> None:
        super().__init__(old)
        self.store = store
        self._getter = getter or StoreGetterSupplier(store)

    def getter(self) -> ValueGetterSupplier:
        return self._getter

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        self.old.enabled = True
        return True


class SourceView(TableView):
    """A table read from a topic: materialized when named, else once something needs it
    (``materialize`` adds its store to the topology)."""

    def __init__(self, old: OldValues, store: str, materialized: Any,
                 materialize: Callable[[], None], versioned: bool = False) -> None:
        super().__init__(old)
        self.store = store
        self._versioned = versioned
        #: the processor's flag (an :class:`OldValues` used as a switch): whether it keeps a
        #: store and forwards through it
        self.materialized = materialized
        self._materialize = materialize

    @property
    def versioned(self) -> bool:
        return self._versioned

    def materialize(self) -> None:
        if not self.materialized.enabled:
            self.materialized.enabled = True
            self._materialize()

    def getter(self) -> ValueGetterSupplier:
        self.materialize()
        return StoreGetterSupplier(self.store)

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if not force_materialization and not self.materialized.enabled:
            return False
        self.materialize()
        self.old.enabled = True
        return True


class DerivedView(TableView):
    """A filter or ``map_values`` without a store: old values and lookups come through its
    parent (``compute(key, value)`` applied on the way)."""

    def __init__(self, old: OldValues, parent: TableView,
                 compute: Callable[[Any, Any], Any]) -> None:
        super().__init__(old)
        self.parent, self.compute = parent, compute

    def getter(self) -> ValueGetterSupplier:
        return MappedGetterSupplier(self.parent.getter(), self.compute)

    @property
    def versioned(self) -> bool:
        return self.parent.versioned

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if self.parent.enable_sending_old_values(force_materialization):
            self.old.enabled = True
        return self.old.enabled


class JoinedView(TableView):
    """A table-table join's result: asked for old values, it has both join processors send
    them (``olds``), which need their tables' old values (``upstream``); lookups go to its
    store when materialized, else join the two tables' lookups (``getter``)."""

    def __init__(self, old: OldValues, olds: tuple[OldValues, ...],
                 upstream: Callable[[], None], getter: Callable[[], ValueGetterSupplier]) -> None:
        super().__init__(old)
        self.olds = olds
        self._upstream = upstream
        self._getter = getter

    def getter(self) -> ValueGetterSupplier:
        return self._getter()

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        self._upstream()
        self.old.enabled = True
        for flag in self.olds:
            flag.enabled = True
        return True


class SuppressedView(TableView):
    """``KTable.suppress``: old values come from its parent; lookups are not supported yet
    (Kafka Streams answers them from the suppression buffer first)."""

    def __init__(self, parent: TableView) -> None:
        super().__init__(parent.old)
        self.parent = parent

    def getter(self) -> ValueGetterSupplier:
        from kspark.errors import TopologyError

        raise TopologyError("joining a suppressed KTable is not supported: join the table "
                            "before suppressing it")

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        return self.parent.enable_sending_old_values(force_materialization)


class _WindowGetter(_LatestGetter):
    def get(self, key: Any) -> ValueAndTimestamp | None:
        found = self.store.fetch_with_timestamp(key.key, key.window.start)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)


class _SessionGetter(_LatestGetter):
    def get(self, key: Any) -> ValueAndTimestamp | None:
        value = self.store.fetch_session(key.key, key.window.start, key.window.end)
        return None if value is None else ValueAndTimestamp(value, key.window.end)


class WindowedGetterSupplier(StoreGetterSupplier):
    """The values of a windowed aggregation by ``Windowed`` key: from its window store, or
    from its session store (a session's timestamp is its end, as Kafka Streams gives it)."""

    def __init__(self, store: str, session: bool) -> None:
        super().__init__(store)
        self.session = session

    def make(self, context: ProcessorContext) -> ValueGetter:
        store = context.get_state_store(self.store)
        return _SessionGetter(store) if self.session else _WindowGetter(store)
