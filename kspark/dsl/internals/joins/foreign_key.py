"""The processors of a foreign-key table-table join (docs/semantics.md §9.5), as Kafka Streams
runs them (KIP-213).

The left table's changes go to :class:`SubscriptionSendProcessor`, which subscribes the row to
its foreign key (and unsubscribes it from the one it leaves) through the registration topic,
keyed by foreign key, so that the right table's side receives it. There
:class:`SubscriptionReceiveProcessor` keeps the subscriptions in a store (``{foreign key
length}{foreign key}{left key}`` -> subscription) and :class:`SubscriptionJoinProcessor` answers
each with the right row's value; a change of a right row answers every subscription to it
(:class:`ForeignTableJoinProcessor`, a prefix scan of the store; a versioned right table's
out-of-order update answers none). Answers go back keyed by the
left key through the response topic to :class:`ResponseJoinProcessor`, which joins them with the
left row's current value, unless the left row has changed since it subscribed (the answer's hash
of the left value differs): then the answer is stale and dropped, so no result is ever computed
from an outdated left value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark.dsl.internals.joins.fk_wire import (
    Instruction,
    Response,
    Subscription,
    combined_key,
    key_prefix,
    split_combined_key,
    value_hash,
)
from kspark.dsl.internals.processors import drop_not_latest, drop_null
from kspark.dsl.internals.table_views import ValueGetterSupplier
from kspark.processor.api import Processor, ProcessorContext
from kspark.records import Change, Record, event_time
from kspark.serdes import Serde, as_serde


def _resolve(serde: Any, default: Any) -> Serde:
    return as_serde(serde) if serde is not None else as_serde(default)


class SubscriptionSendProcessor(Processor):
    """A left row's change -> its subscriptions: unsubscribe from the foreign key it leaves,
    subscribe to its new one (instructions as Kafka Streams sends them for inner and left
    joins); keyed by foreign key."""

    def __init__(self, extractor: Callable[[Any], Any], left: bool, foreign_key_serde: Any,
                 value_serde: Any) -> None:
        self.extractor = extractor
        self.left = left
        self.foreign_key_serde = foreign_key_serde
        self.value_serde = value_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.fk_bytes = _resolve(self.foreign_key_serde, context.key_serde()).serialize
        self.value_bytes = _resolve(self.value_serde, context.value_serde()).serialize

    def process(self, record: Record) -> None:
        change: Change = record.value
        if drop_not_latest(self.context, record, f"({self.context.processor_name!r})"):
            return
        old, new = change.old_value, change.new_value
        old_fk = None if old is None else self.extractor(old)
        new_fk = None if new is None else self.extractor(new)
        digest = value_hash(self.value_bytes(new)) if new is not None else None
        send = self._send
        if self.left:
            if old is None and new is None:
                return
            if old_fk is not None and self.fk_bytes(new_fk) != self.fk_bytes(old_fk):
                send(record, old_fk, digest, Instruction.DELETE_KEY_NO_PROPAGATE)
            send(record, new_fk, digest, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            return
        if new is None:
            if old_fk is not None:
                send(record, old_fk, digest, Instruction.DELETE_KEY_AND_PROPAGATE)
            return
        if new_fk is None:
            drop_null(self.context, record, "foreign-key",
                      f"in foreign-key join {self.context.processor_name!r}")
            if old_fk is not None:
                send(record, old_fk, digest, Instruction.DELETE_KEY_AND_PROPAGATE)
            return
        if old_fk is not None and self.fk_bytes(new_fk) != self.fk_bytes(old_fk):
            send(record, old_fk, digest, Instruction.DELETE_KEY_NO_PROPAGATE)
            send(record, new_fk, digest, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        else:
            send(record, new_fk, digest, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)

    def _send(self, record: Record, foreign_key: Any, digest: bytes | None,
              instruction: Instruction) -> None:
        meta = self.context.record_metadata()
        partition = meta.partition if meta is not None else self.context.partition
        self.context.forward(Record(foreign_key,
                                    Subscription(digest, instruction, record.key, partition),
                                    record.timestamp, record.headers))


class _SubscriptionStoreProcessor(Processor):
    """A processor of the subscription store, whose keys combine a foreign key's and a left
    key's bytes (``fk_serde``, ``pk_serde``: their serdes, the app's default if not given)."""

    def __init__(self, store_name: str, foreign_key_serde: Any, key_serde: Any) -> None:
        self.store_name = store_name
        self.foreign_key_serde = foreign_key_serde
        self.key_serde = key_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.fk_bytes = _resolve(self.foreign_key_serde, context.key_serde()).serialize
        self.pk_serde = _resolve(self.key_serde, context.key_serde())


class SubscriptionReceiveProcessor(_SubscriptionStoreProcessor):
    """Keeps (or removes) each subscription in the subscription store and passes on
    ``(foreign key, left key) -> Change((subscription, ts), previous)``; a subscription without
    a foreign key passes only when it asks for an answer anyway."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.pk_bytes = self.pk_serde.serialize

    def process(self, record: Record) -> None:
        fk, subscription = record.key, record.value
        ts = event_time(record)
        new = (subscription, ts)
        if fk is None:
            if subscription.instruction != Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                drop_null(self.context, record, "foreign-key",
                          f"in subscription store {self.store_name!r}")
                return
            self.context.forward(record.with_key((None, subscription.primary_key))
                                 .with_value(Change(new, None)))
            return
        store_key = combined_key(self.fk_bytes(fk) or b"", self.pk_bytes(
            subscription.primary_key) or b"")
        found = self.store.get_with_timestamp(store_key)
        old = None if found is None else (found.value, found.timestamp)
        if subscription.instruction in (Instruction.DELETE_KEY_AND_PROPAGATE,
                                        Instruction.DELETE_KEY_NO_PROPAGATE):
            self.store.delete(store_key)
        else:
            self.store.put(store_key, subscription, ts)
        self.context.forward(record.with_key((fk, subscription.primary_key))
                             .with_value(Change(new, old)))


class SubscriptionJoinProcessor(Processor):
    """Answers a subscription with the right row's value as its instruction asks; keyed by the
    left key, at the later of the subscription's and the right row's timestamps."""

    def __init__(self, getter: ValueGetterSupplier) -> None:
        self.getter_supplier = getter

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.getter = self.getter_supplier.make(context)

    def process(self, record: Record) -> None:
        fk, pk = record.key
        subscription, ts = record.value.new_value
        found = None if fk is None else self.getter.get(fk)
        if found is not None:
            ts = max(ts, found.timestamp)
        instruction = subscription.instruction
        if instruction == Instruction.DELETE_KEY_NO_PROPAGATE:
            return
        if instruction == Instruction.DELETE_KEY_AND_PROPAGATE:
            value = None
        elif instruction == Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and found is None:
            return
        else:
            value = None if found is None else found.value
        self.context.forward(Record(pk, Response(subscription.hash, value,
                                                 subscription.primary_partition),
                                    ts, record.headers))


class ForeignTableJoinProcessor(_SubscriptionStoreProcessor):
    """A right row's change answers every subscription to its key (in the store's key
    order), at the change's timestamp."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.pk_of = self.pk_serde.deserialize

    def process(self, record: Record) -> None:
        if record.key is None:
            drop_null(self.context, record, "key",
                      f"in foreign-key join {self.context.processor_name!r}")
            return
        if drop_not_latest(self.context, record,
                           f"in foreign-key join {self.context.processor_name!r}"):
            return
        value = record.value.new_value
        forward = self.context.forward
        for entry in self.store.prefix_scan(key_prefix(self.fk_bytes(record.key) or b"")):
            subscription = entry.value
            _, pk_bytes = split_combined_key(entry.key)
            forward(Record(self.pk_of(pk_bytes),
                           Response(subscription.hash, value, subscription.primary_partition),
                           record.timestamp, record.headers))


class ResponseJoinProcessor(Processor):
    """Joins an answer with the left row's current value, or drops it (counted) when the left
    row has changed since it subscribed; an inner join forwards a delete when the right row is
    missing, a left join ``joiner(left, None)``."""

    def __init__(self, getter: ValueGetterSupplier, joiner: Callable[[Any, Any], Any],
                 left: bool, value_serde: Any) -> None:
        self.getter_supplier = getter
        self.joiner = joiner
        self.left = left
        self.value_serde = value_serde

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.getter = self.getter_supplier.make(context)
        self.value_bytes = _resolve(self.value_serde, context.value_serde()).serialize

    def process(self, record: Record) -> None:
        response: Response = record.value
        current = self.getter.get(record.key)
        digest = None if current is None else value_hash(self.value_bytes(current.value))
        if digest != response.hash:
            self.context.record_dropped(
                "stale-response",
                f"dropped a foreign-key join answer for key {record.key!r:.80}: the row changed "
                f"since it subscribed (processor {self.context.processor_name!r})")
            return
        value = None if current is None else current.value
        if response.foreign_value is None and (not self.left or current is None):
            result = None
        else:
            result = self.joiner(value, response.foreign_value)
        self.context.forward(record.with_value(result))


def response_partition(key: Any, value: Any) -> int | None:
    """The partition of an answer: its left row's (as Kafka Streams routes answers)."""
    return value.primary_partition if isinstance(value, Response) else None
