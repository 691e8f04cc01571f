"""Duration arguments: every public duration is an ``int`` of milliseconds or a ``timedelta``."""

from __future__ import annotations

from datetime import timedelta
from numbers import Integral
from typing import Any

Duration = int | timedelta


def whole(value: Any) -> int | None:
    """``value`` as an ``int`` if it is a whole number of any integer type (numpy's, pandas'),
    not a bool; else ``None``."""
    if type(value) is int:
        return value
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    return None


def to_ms(value: Duration, what: str = "duration") -> int:
    """Return ``value`` in whole milliseconds; raise ``TypeError`` naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be int milliseconds or timedelta, got bool")
    ms = whole(value)
    if ms is not None:
        return ms
    if isinstance(value, timedelta):
        return (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    raise TypeError(f"{what} must be int milliseconds or timedelta, got {type(value).__name__}")
