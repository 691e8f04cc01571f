"""``KStream.split()`` (KIP-418) and the printing action of ``KStream.print``.

Names as Kafka Streams gives them: the splitter is the node ``prefix`` (or
``KSTREAM-BRANCH-<index>`` when no prefix is given; the index is taken either way), each branch
the pass-through node ``<splitter name><branch name>``, an unnamed branch
``<splitter name><position>`` counted from 1, an unnamed default branch ``<splitter name>0``.
Every branch also takes an index from the builder's counter, as Kafka Streams' does, so later
generated names match a Java application's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TextIO

from kspark.dsl.api import BranchedKStream, KStream
from kspark.dsl.internals import stateless
from kspark.dsl.internals.graph import DslGraph
from kspark.serdes import Serde


class BranchedKStreamImpl(BranchedKStream):
    """The branches of one ``split()``, added in order until the default branch closes it."""

    def __init__(self, builder: DslGraph, parent: str, prefix: str | None,
                 key_serde: Serde | None, value_serde: Serde | None,
                 repartition_required: bool) -> None:
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"split's prefix must be a string, got {prefix!r}")
        self._builder = builder
        self._serdes = key_serde, value_serde
        self._repartition_required = repartition_required
        # a prefix takes an index all the same, as in Kafka Streams
        self._splitter = builder.new_name("KSTREAM-BRANCH-")
        if prefix:
            self._splitter = prefix
        self._predicates: list[Callable[[Any, Any], Any]] = []
        self._children: list[str] = []
        self._branches: dict[str, KStream] = {}
        self._closed = False
        # the processor reads the lists when a task builds it: after every branch is added
        builder.topology.add_processor(
            self._splitter,
            partial(stateless.BranchProcessor, self._predicates, self._children),
            parent)

    def branch(self, predicate: Callable[[Any, Any], Any], name: str | None = None,
               chain: Callable[[KStream], KStream | None] | None = None) -> BranchedKStream:
        if not callable(predicate):
            raise TypeError(f"branch needs a predicate(key, value), got {predicate!r}")
        self._check_open("branch")
        self._predicates.append(predicate)
        self._add(name, len(self._predicates), chain)
        return self

    def default_branch(self, name: str | None = None,
                       chain: Callable[[KStream], KStream | None] | None = None
                       ) -> dict[str, KStream]:
        self._check_open("default_branch")
        self._add(name, 0, chain)
        self._closed = True
        return self._branches

    def no_default_branch(self) -> dict[str, KStream]:
        self._check_open("no_default_branch")
        self._closed = True
        return self._branches

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise ValueError(f"{method}() after the split {self._splitter!r} was closed by "
                             f"default_branch() or no_default_branch()")

    def _add(self, name: str | None, position: int,
             chain: Callable[[KStream], KStream | None] | None) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"a branch name must be a non-empty string, got {name!r}")
        child = self._splitter + (name if name is not None else str(position))
        builder = self._builder
        builder.topology.add_processor(child, stateless.PassThroughProcessor, self._splitter)
        self._children.append(child)
        builder.new_name(child)  # Kafka Streams takes an index here too
        stream = builder.new_kstream(child, *self._serdes, self._repartition_required)
        if chain is None:
            self._branches[child] = stream
            return
        result = chain(stream)
        if result is None:  # a chain that consumes its branch: not in the result
            return
        if not isinstance(result, KStream):
            raise TypeError(f"the chain of branch {child!r} must return a KStream or None, "
                            f"got {result!r:.80}")
        self._branches[child] = result


class PrintAction:
    """``KStream.print``'s action: ``[label]: <mapper(key, value)>`` per record, one line each,
    to ``file`` (standard output by default, looked up when a record is printed)."""

    def __init__(self, label: str, mapper: Callable[[Any, Any], Any] | None,
                 file: TextIO | None) -> None:
        self.label, self.mapper, self.file = label, mapper, file

    def __call__(self, key: Any, value: Any) -> None:
        text = f"{key}, {value}" if self.mapper is None else self.mapper(key, value)
        print(f"[{self.label}]: {text}", file=self.file or sys.stdout)
