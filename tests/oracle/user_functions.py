"""The user functions of the oracle's shapes on kspark's side (the same as ``oracle/.../
Oracle.java``'s, tests/oracle/README.md), and how a case stopped by one of them, or by a key
of the wrong type, is compared with the oracle's ``error`` line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kspark import SerializationError, StreamsError


class UserFunctionError(RuntimeError):
    """Raised by a case's user function on its ``raise_on`` value (the oracle's own)."""


# -- the user functions of each op (the same as the oracle's) -------------------------------------
def zero() -> int:
    return 0


def empty() -> str:
    return ""


def _sum(key: Any, value: Any, agg: Any) -> Any:
    return agg if value is None else agg + value


def _java(text: Any) -> str:
    """``text`` as Java's String concatenation prints it (``null`` for ``None``)."""
    return "null" if text is None else text


def _concat(key: Any, value: Any, agg: Any) -> Any:
    return _java(agg) + _java(value)  # Java's String concatenation


def merge(key: Any, a: Any, b: Any) -> Any:
    return a + b


def _zero_if_none(agg: Any) -> Any:
    return 0 if agg is None else agg


REDUCERS: dict[str, Callable[[Any, Any], Any]] = {
    "reduce_sum": lambda a, b: a if b is None else a + b,
    "reduce_max": lambda a, b: a if b is None else max(a, b),
    "reduce_concat": lambda a, b: a + ("null" if b is None else b),
}


class Misbehaving:
    """A case's ``none_on`` and ``raise_on`` values: an aggregator or reducer given the one
    returns ``None``, given the other raises :class:`UserFunctionError` (a ``None`` value never
    matches)."""

    def __init__(self, none_on: Any, raise_on: Any) -> None:
        self.none_on, self.raise_on = none_on, raise_on

    def returns_none(self, value: Any) -> bool:
        if value is not None and value == self.raise_on:
            raise UserFunctionError(f"user function fails on {value}")
        return value is not None and value == self.none_on

    def aggregator(self, op: str) -> Callable[[Any, Any, Any], Any]:
        """The aggregator of ``op`` (``sum``, ``concat``)."""
        base = _sum if op == "sum" else _concat
        return lambda k, v, agg: None if self.returns_none(v) else base(k, v, agg)

    def joiner(self, base: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """The join shapes' joiner ``base``, judged by its left value."""
        return lambda left, right: None if self.returns_none(left) else base(left, right)

    def merger(self, op: str) -> Callable[[Any, Any, Any], Any]:
        """The session merger of ``op`` (``sum``, ``concat``), judged by the aggregates it is
        given (the one merged so far, from the initializer, then the stored session's); a null
        first one (what it returned before) counts as 0 in ``sum`` (Java's concatenation prints
        it as ``null``)."""
        if op == "sum":
            return lambda k, a, b: (None if self.returns_none(a) or self.returns_none(b)
                                    else _zero_if_none(a) + b)
        return lambda k, a, b: (None if self.returns_none(a) or self.returns_none(b)
                                else _java(a) + b)

    def session_aggregator(self, op: str, merger: Misbehaving) -> Callable[[Any, Any, Any], Any]:
        """:meth:`aggregator`; with ``merger`` misbehaving, ``sum``'s reads a null aggregate (the
        merger's) as 0 (the oracle's ``sessionAggregator``)."""
        base = self.aggregator(op)
        if op != "sum" or not merger.active():
            return base
        return lambda k, v, agg: base(k, v, _zero_if_none(agg))

    def active(self) -> bool:
        """Whether any value makes the function misbehave."""
        return self.none_on is not None or self.raise_on is not None

    def reducer(self, op: str) -> Callable[[Any, Any], Any]:
        """The reducer of ``op`` (``reduce_*``), judged by its second argument."""
        base = REDUCERS[op]
        return lambda a, b: None if self.returns_none(b) else base(a, b)


def group(value: int, groups: int) -> str:
    """The table shape's group of a row: ``"g" + floorMod(value, groups)``."""
    return f"g{value % groups}"


def failure_line(exc: StreamsError, item: dict[str, Any], index: int, offset: int
                 ) -> dict[str, Any] | None:
    """The line of a case stopped by ``exc`` at input ``index`` (the oracle's ``error`` line):
    its kind, ``user_function`` (:class:`UserFunctionError`) or ``serialization``; ``None`` for
    any other failure. A message that does not name the processor, topic, partition, offset and
    key of the record (a punctuator's failure: the processor and the punctuation) has the kind
    ``unlocated: <message>``."""
    causes = []
    cause: BaseException | None = exc
    while cause is not None:
        causes.append(cause)
        cause = cause.__cause__
    if any(isinstance(c, UserFunctionError) for c in causes):
        kind = "user_function"
    elif any(isinstance(c, SerializationError) for c in causes):
        kind = "serialization"
    else:
        return None
    # the failing record: the input record, or its copy read back from a repartition topic
    # (another offset), or the one a commit follows (a cache flushed at the commit: the key
    # being written is named)
    message = str(exc)
    if "(while punctuating " in message:  # a punctuator's failure: no record to name
        located_punctuation = "processor '" in message
        return {"kind": "error", "input": index,
                "error": kind if located_punctuation else f"unlocated: {message}"}
    where = re.search(r"topic '([^']+)' partition \d+ offset (\d+)", message)
    located = where is not None and (
        where.group(1) != item.get("topic", "in") or int(where.group(2)) == offset)
    # a record read back from a repartition topic is named by its new key
    rekeyed = where is not None and where.group(1) != item.get("topic", "in")
    if ("processor '" not in message or not located
            or (f"key {item.get('key')!r}" not in message and "record key " not in message
                and not (rekeyed and " key " in message))):
        kind = f"unlocated: {message}"
    return {"kind": "error", "input": index, "error": kind}
