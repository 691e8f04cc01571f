"""Small helpers shared by the in-memory stores."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from kspark.records import KeyValue


def check_name(name: Any) -> str:
    """Return ``name`` if it is a non-empty string, else raise ``ValueError``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"store name must be a non-empty string, got {name!r}")
    return name


def order_error(store: str, exc: TypeError) -> TypeError:
    """The error raised when keys of a store cannot be compared with each other."""
    return TypeError(
        f"store {store!r}: keys (and range bounds) must be of one comparable type: {exc}"
    )


def merge_sorted(
    store: str,
    runs: list[list[Any]],
    sort_key: Callable[[Any], Any],
    to_kv: Callable[[Any], KeyValue],
    *,
    reverse: bool = False,
    presorted: bool = False,
) -> list[KeyValue]:
    """Sort each per-bucket run (unless ``presorted``), merge the runs in ``sort_key`` order and
    convert each item with ``to_kv``. Comparison failures name the store."""
    try:
        if not presorted:
            runs = [sorted(run, key=sort_key, reverse=reverse) for run in runs if run]
        else:
            runs = [run for run in runs if run]
        if len(runs) == 1:
            merged: Iterable[Any] = runs[0]
        else:
            merged = _merged(runs, sort_key, reverse)
        return [to_kv(item) for item in merged]
    except TypeError as e:
        raise order_error(store, e) from e


def _merged(runs: list[list[Any]], sort_key: Callable[[Any], Any], reverse: bool) -> list[Any]:
    """What ``heapq.merge`` gives of the sorted ``runs``: one stable sort of them all (equal
    keys in the order of their runs, as the merge puts them), or, should that fail, the merge
    itself (raising the merge's own error)."""
    try:
        return sorted(itertools.chain.from_iterable(runs), key=sort_key, reverse=reverse)
    except TypeError:
        return list(heapq.merge(*runs, key=sort_key, reverse=reverse))
