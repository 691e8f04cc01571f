"""The record a test topic reads and pipes (a module of its own: the driver is compiled, and a
compiled dataclass cannot keep pytest's ``__test__`` marker as a class attribute)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kspark.records import Headers


@dataclass(frozen=True)
class TestRecord:
    """A record read from (or piped into) a test topic."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int | None = None
    headers: Headers = ()
