"""The DSL's stateless KStream operators, each from one primitive.

An operator defines what it does to one record, and both its record form (``process``, which
forwards through the processor context) and its list form (``map_batch``, used down straight
chains into a sink) are derived from that one definition, so the two cannot disagree:
:class:`OneToOne` (``map_one``), :class:`Filtering` (``keep``) and :class:`OneToMany`
(``expand``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from kspark.processor.api import Processor
from kspark.processor.batch import PassThrough, RecordMapper
from kspark.records import Record


class OneToOne(Processor, RecordMapper):
    """An operator that forwards exactly one record for each record (:meth:`map_one`)."""

    @abstractmethod
    def map_one(self, record: Record) -> Record:
        """The record forwarded for ``record``."""

    def process(self, record: Record) -> None:
        self.context.forward(self.map_one(record))

    def map_batch(self, records: list[Record]) -> list[Record]:
        map_one = self.map_one
        return [map_one(r) for r in records]


class Filtering(Processor, RecordMapper):
    """An operator that forwards the records it keeps (:meth:`keep`) unchanged."""

    @abstractmethod
    def keep(self, record: Record) -> bool:
        """Whether ``record`` is forwarded."""

    def process(self, record: Record) -> None:
        if self.keep(record):
            self.context.forward(record)

    def map_batch(self, records: list[Record]) -> list[Record]:
        keep = self.keep
        return [r for r in records if keep(r)]


class OneToMany(Processor, RecordMapper):
    """An operator that forwards any number of records for each record (:meth:`expand`)."""

    @abstractmethod
    def expand(self, record: Record) -> Iterable[Record]:
        """The records forwarded for ``record``, in order."""

    def process(self, record: Record) -> None:
        forward = self.context.forward
        for out in self.expand(record):
            forward(out)

    def map_batch(self, records: list[Record]) -> list[Record]:
        expand = self.expand
        return [out for r in records for out in expand(r)]


def pair(result: Any, what: str) -> tuple[Any, Any]:
    """``result`` as a ``(key, value)`` pair, or a TypeError naming ``what`` returned it."""
    try:
        key, value = result
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must return a (key, value) pair, got {result!r:.80}") from exc
    return key, value


class FilterProcessor(Filtering):
    """Forwards records for which ``predicate(key, value)`` is true (false if ``negate``)."""

    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool = False) -> None:
        self.predicate, self.negate = predicate, negate

    def keep(self, record: Record) -> bool:
        return bool(self.predicate(record.key, record.value)) != self.negate


class MapValuesProcessor(OneToOne):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def map_one(self, record: Record) -> Record:
        return Record(record.key, self.mapper(record.value), record.timestamp, record.headers)


class MapProcessor(OneToOne):
    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def map_one(self, record: Record) -> Record:
        key, value = pair(self.mapper(record.key, record.value), "map's mapper")
        return Record(key, value, record.timestamp, record.headers)


class SelectKeyProcessor(OneToOne):
    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def map_one(self, record: Record) -> Record:
        key = self.selector(record.key, record.value)
        return Record(key, record.value, record.timestamp, record.headers)


class PeekProcessor(OneToOne):
    """Calls ``action(key, value)`` and forwards the record unchanged."""

    def __init__(self, action: Callable[[Any, Any], Any]) -> None:
        self.action = action

    def map_one(self, record: Record) -> Record:
        self.action(record.key, record.value)
        return record


class PassThroughProcessor(Processor, PassThrough):
    """Forwards every record unchanged (``merge``, a ``split`` branch)."""

    def process(self, record: Record) -> None:
        self.context.forward(record)


class BranchProcessor(Processor):
    """``split()``'s processor: forwards each record to the child of the first of
    ``predicates`` that holds for ``(key, value)``, else to the default child (the last of
    ``children``, when there is one more child than predicates), else nowhere."""

    def __init__(self, predicates: list[Callable[[Any, Any], Any]],
                 children: list[str]) -> None:
        self.predicates, self.children = predicates, children

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        for i, predicate in enumerate(self.predicates):
            if predicate(key, value):
                self.context.forward(record, self.children[i])
                return
        if len(self.children) > len(self.predicates):
            self.context.forward(record, self.children[-1])


class ForeachProcessor(Processor):
    """Calls ``action(key, value)`` for each record and forwards nothing (``foreach``,
    ``print``)."""

    def __init__(self, action: Callable[[Any, Any], Any]) -> None:
        self.action = action

    def process(self, record: Record) -> None:
        self.action(record.key, record.value)


class FlatMapProcessor(OneToMany):
    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def expand(self, record: Record) -> Iterable[Record]:
        out = []
        for result in self.mapper(record.key, record.value) or ():
            key, value = pair(result, "flat_map's mapper (for each item)")
            out.append(Record(key, value, record.timestamp, record.headers))
        return out


class FlatMapValuesProcessor(OneToMany):
    def __init__(self, mapper: Callable[[Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def expand(self, record: Record) -> Iterable[Record]:
        return [Record(record.key, value, record.timestamp, record.headers)
                for value in self.mapper(record.value) or ()]
