"""How a record joins the sessions of its key: the one function that both the record-by-record
path (:meth:`SessionWindowAggregateProcessor.process`) and the batch path's replay call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def merged_session(
    key: Any,
    ts: int,
    found: list[tuple[int, int, Any]],
    initializer: Callable[[], Any],
    merger: Callable[[Any, Any, Any], Any],
) -> tuple[int, int, Any]:
    """The session a record of ``key`` at ``ts`` joins, from the sessions it reaches
    (``(end, start, aggregate)`` in the store's order: by end, then start): its start, its end
    and the merged aggregate before the record is added."""
    agg = initializer()
    start = end = ts
    for e, s, stored in found:
        agg = merger(key, agg, stored)
        if s < start:
            start = s
        if e > end:
            end = e
    return start, end, agg
