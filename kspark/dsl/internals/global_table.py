"""The implementation of :class:`~kspark.dsl.api.GlobalKTable`."""

from __future__ import annotations

from kspark.dsl.api import GlobalKTable
from kspark.dsl.internals.table_views import StoreGetterSupplier, ValueGetterSupplier


class GlobalKTableImpl(GlobalKTable):
    """A global table: the store every task that joins it keeps whole."""

    def __init__(self, store: str, queryable: bool) -> None:
        self.store = store
        self._queryable = queryable

    @property
    def queryable_store_name(self) -> str | None:
        return self.store if self._queryable else None

    def getter(self) -> ValueGetterSupplier:
        """Lookups in the global store."""
        return StoreGetterSupplier(self.store)
