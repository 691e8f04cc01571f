"""Small helpers shared by the in-memory stores."""

from __future__ import annotations

import heapq
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
            merged = heapq.merge(*runs, key=sort_key, reverse=reverse)
        return [to_kv(item) for item in merged]
    except TypeError as e:
        raise order_error(store, e) from e
