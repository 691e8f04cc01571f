"""The processors of a table-table join on the primary key (docs/semantics.md §9.4), as Kafka
Streams runs them.

Each table's changes go to a join processor of their own that looks up the other table's
current value of the key: the left table's changes through ``KTABLE-JOINTHIS-``, the right
table's through ``KTABLE-JOINOTHER-`` (its joiner turned around, so every result is
``joiner(left, right)``); both forward to a merge processor (``KTABLE-MERGE-``) that keeps the
result in a store when it is materialized. A result's timestamp is the larger of the change's
and the other value's. What each kind forwards for a change ``(new, old)`` given the other
side's value ``other``:

- inner: nothing if ``other`` is absent, else ``(joiner(new, other) or None, joiner(old,
  other) or None)``;
- left (the left table's changes): ``(joiner(new, other), joiner(old, other))`` for whichever of
  new and old is present; nothing when all three are absent;
- right (the right table's changes in a left join): nothing if the left value is absent, else
  ``(joiner(left, new), joiner(left, old))``, a ``None`` side included;
- outer: ``joiner`` wherever one of the two sides is present; nothing when all three are absent.

Old results are computed only when the join sends old values (``OldValues``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark.dsl.internals.processors import MaterializingProcessor, drop_not_latest, drop_null
from kspark.dsl.internals.table_views import ValueGetter, ValueGetterSupplier
from kspark.processor.api import Processor, ProcessorContext
from kspark.records import Change, Record, ValueAndTimestamp, change, event_time

#: join kinds of each side's processor: (left table's side, right table's side)
SIDES = {"inner": ("inner", "inner"), "left": ("left", "right"), "outer": ("outer", "outer")}


class TableTableJoinProcessor(Processor):
    """One side of a table-table join (see the module): ``kind`` is ``inner``, ``left`` (the
    left table of a left join), ``right`` (its right table) or ``outer``; ``joiner(this,
    other)`` takes this side's value first."""

    def __init__(self, kind: str, getter: ValueGetterSupplier,
                 joiner: Callable[[Any, Any], Any], old: Any) -> None:
        self.kind = kind
        self.getter_supplier = getter
        self.joiner = joiner
        self.old = old

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.getter = self.getter_supplier.make(context)

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            drop_null(self.context, record, "key",
                      f"in table-table join {self.context.processor_name!r}")
            return
        update: Change = record.value
        if drop_not_latest(self.context, record,
                           f"in table-table join {self.context.processor_name!r}"):
            return
        new, old = update.new_value, update.old_value
        found = self.getter.get(key)
        other = None if found is None else found.value
        kind, joiner = self.kind, self.joiner
        ts = event_time(record)
        if other is None:
            if kind in ("inner", "right") or (new is None and old is None):
                return
        else:
            ts = max(ts, found.timestamp)  # type: ignore[union-attr]
        send_old = self.old.enabled
        if kind == "right":
            new_out = joiner(new, other)
            old_out = joiner(old, other) if send_old else None
        elif kind == "outer":
            new_out = joiner(new, other) if other is not None or new is not None else None
            old_out = (joiner(old, other) if send_old and (other is not None or old is not None)
                       else None)
        else:
            new_out = None if new is None else joiner(new, other)
            old_out = joiner(old, other) if send_old and old is not None else None
        self.context.forward(Record(key, change(new_out, old_out), ts, record.headers))


class TableJoinMergeProcessor(MaterializingProcessor):
    """Forwards both sides' results; materialized, keeps them in its store first (and forwards
    through it, so caching combines them)."""

    def process(self, record: Record) -> None:
        update: Change = record.value
        if self.writer is not None:
            self.writer.put(record.key, update.new_value, update.old_value, event_time(record),
                            record.headers)
        elif self.old.enabled:
            self.context.forward(record)
        else:
            self.context.forward(record.with_value(change(update.new_value, None)))


class _JoinedGetter:
    versioned = False

    def __init__(self, kind: str, left: ValueGetter, right: ValueGetter,
                 joiner: Callable[[Any, Any], Any]) -> None:
        self.kind, self.left, self.right, self.joiner = kind, left, right, joiner

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        return self.get(key)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        left = self.left.get(key)
        if self.kind != "outer":
            if left is None:
                return None
            right = self.right.get(key)
            if right is None:
                if self.kind == "inner":
                    return None
                return ValueAndTimestamp(self.joiner(left.value, None), left.timestamp)
            return ValueAndTimestamp(self.joiner(left.value, right.value),
                                     max(left.timestamp, right.timestamp))
        right = self.right.get(key)
        if left is None and right is None:
            return None
        value = self.joiner(None if left is None else left.value,
                            None if right is None else right.value)
        ts = max(-1 if left is None else left.timestamp, -1 if right is None else right.timestamp)
        return None if value is None else ValueAndTimestamp(value, ts)


class JoinedGetterSupplier(ValueGetterSupplier):
    """Lookups of a join's result without a store: both tables' lookups, joined."""

    def __init__(self, kind: str, left: ValueGetterSupplier, right: ValueGetterSupplier,
                 joiner: Callable[[Any, Any], Any]) -> None:
        self.kind, self.left, self.right, self.joiner = kind, left, right, joiner

    @property
    def store_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.left.store_names + self.right.store_names))

    def make(self, context: ProcessorContext) -> ValueGetter:
        return _JoinedGetter(self.kind, self.left.make(context), self.right.make(context),
                             self.joiner)

    def __reduce__(self) -> tuple[Any, ...]:  # compiled, it pickles only so
        return JoinedGetterSupplier, (self.kind, self.left, self.right, self.joiner)


def reversed_joiner(joiner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``joiner`` with its arguments turned around (the right table's side)."""
    return _Reversed(joiner)


class _Reversed:
    def __init__(self, joiner: Callable[[Any, Any], Any]) -> None:
        self.joiner = joiner

    def __call__(self, this: Any, other: Any) -> Any:
        return self.joiner(other, this)

    def __reduce__(self) -> tuple[Any, ...]:  # compiled, it pickles only so
        return _Reversed, (self.joiner,)
