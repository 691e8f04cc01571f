"""Duration arguments: every public duration is an ``int`` of milliseconds or a ``timedelta``."""

from __future__ import annotations

from datetime import timedelta

Duration = int | timedelta


def to_ms(value: Duration, what: str = "duration") -> int:
    """Return ``value`` in whole milliseconds; raise ``TypeError`` naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be int milliseconds or timedelta, got bool")
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        return (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    raise TypeError(f"{what} must be int milliseconds or timedelta, got {type(value).__name__}")
