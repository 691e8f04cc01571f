"""Window specifications and window values (docs/semantics.md §2, §3)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from enum import Enum
from typing import Any

from mypy_extensions import mypyc_attr

from kspark._duration import Duration, to_ms
from kspark.frozen import pure_python_class, reduce_frozen, slot_setters


# compiled: not tracked by the garbage collector (immutable, so no cycle can run through
# one unless a mutable key or value is later made to hold it), one freed instance reused
@mypyc_attr(acyclic=True, free_list_len=1)
class Window:
    """A time window ``[start, end]`` in ms. Session windows are inclusive at both ends; time
    windows are ``[start, end)``. Immutable; equal, hashed and ordered by ``(start, end)``."""

    __slots__ = ("end", "start")
    start: int
    end: int

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"window end {end} is before its start {start}")
        self.start = start
        self.end = end

    def overlaps(self, other: Window) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Window):
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __lt__(self, other: Window) -> bool:
        return (self.start, self.end) < (other.start, other.end)

    def __le__(self, other: Window) -> bool:
        return (self.start, self.end) <= (other.start, other.end)

    def __gt__(self, other: Window) -> bool:
        return (self.start, self.end) > (other.start, other.end)

    def __ge__(self, other: Window) -> bool:
        return (self.start, self.end) >= (other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"Window(start={self.start!r}, end={self.end!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Window, (self.start, self.end)


# compiled: not tracked by the garbage collector (immutable, so no cycle can run through
# one unless a mutable key or value is later made to hold it), one freed instance reused
@mypyc_attr(acyclic=True, free_list_len=1)
class Windowed:
    """A key together with the window it was aggregated in; immutable, equal and hashed by
    value."""

    __slots__ = ("key", "window")
    key: Any
    window: Window

    def __init__(self, key: Any, window: Window) -> None:
        self.key = key
        self.window = window

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Windowed):
            return NotImplemented
        return self.key == other.key and self.window == other.window

    def __hash__(self) -> int:
        return hash((self.key, self.window.start, self.window.end))

    def __repr__(self) -> str:
        return f"Windowed({self.key!r}, [{self.window.start}, {self.window.end}])"

    def __reduce__(self) -> tuple[Any, ...]:
        return Windowed, (self.key, self.window)


if pure_python_class(Window):
    _set_start, _set_end = slot_setters(Window, "start", "end")
    _set_key, _set_window = slot_setters(Windowed, "key", "window")

    def _window_init(self: Window, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"window end {end} is before its start {start}")
        _set_start(self, start)
        _set_end(self, end)

    def _windowed_init(self: Windowed, key: Any, window: Window) -> None:
        _set_key(self, key)
        _set_window(self, window)

    setattr(Window, "__init__", _window_init)  # noqa: B010
    setattr(Windowed, "__init__", _windowed_init)  # noqa: B010


def _positive(value: Duration, what: str) -> int:
    ms = to_ms(value, what)
    if ms <= 0:
        raise ValueError(f"{what} must be > 0 ms, got {ms}")
    return ms


def _non_negative(value: Duration, what: str) -> int:
    ms = to_ms(value, what)
    if ms < 0:
        raise ValueError(f"{what} must be >= 0 ms, got {ms}")
    return ms


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Sessions separated by an inactivity gap, accepting late records for ``grace`` ms."""

    inactivity_gap_ms: int
    grace_ms: int

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)

    def __post_init__(self) -> None:
        if self.inactivity_gap_ms < 0:  # 0: only records at the same time share a session
            raise ValueError(f"inactivity gap must be >= 0 ms, got {self.inactivity_gap_ms}")
        if self.grace_ms < 0:
            raise ValueError(f"grace must be >= 0 ms, got {self.grace_ms}")

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        return cls(_non_negative(gap, "inactivity gap"), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        return cls(_non_negative(gap, "inactivity gap"), _non_negative(grace, "grace"))

    @property
    def default_retention_ms(self) -> int:
        return self.inactivity_gap_ms + self.grace_ms


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """Tumbling (``advance == size``) or hopping windows ``[n*advance, n*advance + size)``."""

    size_ms: int
    grace_ms: int
    advance_ms: int

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"window size must be > 0 ms, got {self.size_ms}")
        if self.grace_ms < 0:
            raise ValueError(f"grace must be >= 0 ms, got {self.grace_ms}")
        if self.advance_ms <= 0 or self.advance_ms > self.size_ms:
            raise ValueError(
                f"advance must be > 0 and <= window size {self.size_ms} ms, got {self.advance_ms}"
            )

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        ms = _positive(size, "window size")
        return cls(ms, 0, ms)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        ms = _positive(size, "window size")
        return cls(ms, _non_negative(grace, "grace"), ms)

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Return hopping windows of the same size and grace advancing by ``advance``."""
        return TimeWindows(self.size_ms, self.grace_ms, _positive(advance, "advance"))

    @property
    def default_retention_ms(self) -> int:
        return self.size_ms + self.grace_ms

    def windows_for(self, timestamp: int) -> list[Window]:
        """Every window containing ``timestamp``: starts in ``(ts - size, ts]`` and >= 0,
        in ascending start order."""
        first = max(0, timestamp - self.size_ms + self.advance_ms)
        start = (first // self.advance_ms) * self.advance_ms
        if start <= timestamp - self.size_ms:
            start += self.advance_ms
        out = []
        while start <= timestamp:
            out.append(Window(start, start + self.size_ms))
            start += self.advance_ms
        return out


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Windows ``[t - diff, t]`` (inclusive) created as records enter or leave them."""

    time_difference_ms: int
    grace_ms: int

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)

    def __post_init__(self) -> None:
        if self.time_difference_ms <= 0:
            raise ValueError(f"time difference must be > 0 ms, got {self.time_difference_ms}")
        if self.grace_ms < 0:
            raise ValueError(f"grace must be >= 0 ms, got {self.grace_ms}")

    @classmethod
    def of_time_difference_with_no_grace(cls, diff: Duration) -> SlidingWindows:
        return cls(_positive(diff, "time difference"), 0)

    @classmethod
    def of_time_difference_and_grace(cls, diff: Duration, grace: Duration) -> SlidingWindows:
        return cls(_positive(diff, "time difference"), _non_negative(grace, "grace"))

    @property
    def default_retention_ms(self) -> int:
        return self.time_difference_ms * 2 + self.grace_ms


@dataclass(frozen=True, slots=True)
class JoinWindows:
    """The windows of a stream-stream join: a record at ``t`` joins the other side's records
    with timestamps in ``[t - before, t + after]`` (from the other side's view: ``[t - after,
    t + before]``), and records are accepted ``grace`` ms after that window has closed.
    ``before`` or ``after`` may be negative as long as their sum is not."""

    before_ms: int
    after_ms: int
    grace_ms: int

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)

    def __post_init__(self) -> None:
        if self.before_ms + self.after_ms < 0:
            raise ValueError(
                "the join window (before + after) must not be negative, got before "
                f"{self.before_ms} ms and after {self.after_ms} ms"
            )
        if self.grace_ms < 0:
            raise ValueError(f"grace must be >= 0 ms, got {self.grace_ms}")

    @classmethod
    def of_time_difference_with_no_grace(cls, diff: Duration) -> JoinWindows:
        ms = _non_negative(diff, "time difference")
        return cls(ms, ms, 0)

    @classmethod
    def of_time_difference_and_grace(cls, diff: Duration, grace: Duration) -> JoinWindows:
        ms = _non_negative(diff, "time difference")
        return cls(ms, ms, _non_negative(grace, "grace"))

    def before(self, before: Duration) -> JoinWindows:
        """These windows reaching ``before`` ms back (may be negative)."""
        return JoinWindows(to_ms(before, "before"), self.after_ms, self.grace_ms)

    def after(self, after: Duration) -> JoinWindows:
        """These windows reaching ``after`` ms ahead (may be negative)."""
        return JoinWindows(self.before_ms, to_ms(after, "after"), self.grace_ms)

    @property
    def size_ms(self) -> int:
        """``before + after``: the window size of the join's stores."""
        return self.before_ms + self.after_ms

    @property
    def default_retention_ms(self) -> int:
        """``size + grace``: how long the join's stores keep a record."""
        return self.size_ms + self.grace_ms


class EmitType(Enum):
    ON_WINDOW_UPDATE = "on_window_update"
    ON_WINDOW_CLOSE = "on_window_close"


@dataclass(frozen=True, slots=True)
class EmitStrategy:
    """When a windowed aggregation forwards results: on every update or once on close."""

    type: EmitType

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls(EmitType.ON_WINDOW_UPDATE)

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        return cls(EmitType.ON_WINDOW_CLOSE)
