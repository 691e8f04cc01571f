"""What ``KTable.suppress`` holds back: :class:`Suppressed` and its :class:`BufferConfig`.

How a suppression releases records is described in :mod:`kspark.dsl.internals.suppress`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kspark._duration import Duration, to_ms

_EMIT = "emit_early"
_SHUT_DOWN = "shut_down"


def _limit(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what} must be an int, got {n!r}")
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return n


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """How much a suppression may buffer and what happens when that is exceeded.

    ``records_limit`` / ``bytes_limit`` are ``None`` when unbounded; ``full_strategy`` is
    ``"emit_early"`` or ``"shut_down"``."""

    records_limit: int | None = None
    bytes_limit: int | None = None
    full_strategy: str = _SHUT_DOWN

    def __post_init__(self) -> None:
        if self.full_strategy not in (_EMIT, _SHUT_DOWN):
            raise ValueError(f"unknown buffer-full strategy {self.full_strategy!r}")

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """No limit (the buffer can never be full)."""
        return cls(None, None, _SHUT_DOWN)

    @classmethod
    def max_records(cls, n: int) -> BufferConfig:
        """At most ``n`` buffered keys; emits the oldest early when full."""
        return cls(_limit(n, "max records"), None, _EMIT)

    @classmethod
    def max_bytes(cls, n: int) -> BufferConfig:
        """At most ``n`` estimated bytes (pickled key + value); emits the oldest early when
        full."""
        return cls(None, _limit(n, "max bytes"), _EMIT)

    def with_max_records(self, n: int) -> BufferConfig:
        return replace(self, records_limit=_limit(n, "max records"))

    def with_max_bytes(self, n: int) -> BufferConfig:
        return replace(self, bytes_limit=_limit(n, "max bytes"))

    def with_no_bound(self) -> BufferConfig:
        return replace(self, records_limit=None, bytes_limit=None)

    def emit_early_when_full(self) -> BufferConfig:
        """When full, release the oldest buffered keys before their time."""
        return replace(self, full_strategy=_EMIT)

    def shut_down_when_full(self) -> BufferConfig:
        """When full, stop processing with :class:`~kspark.errors.BufferFullError`."""
        return replace(self, full_strategy=_SHUT_DOWN)

    @property
    def bounded(self) -> bool:
        return self.records_limit is not None or self.bytes_limit is not None

    @property
    def emits_early(self) -> bool:
        return self.full_strategy == _EMIT


_WINDOW_CLOSE = "until_window_closes"
_TIME_LIMIT = "until_time_limit"


@dataclass(frozen=True, slots=True)
class Suppressed:
    """What ``KTable.suppress`` holds back; build it with the class methods."""

    kind: str
    buffer_config: BufferConfig
    time_limit_ms: int | None = None
    name: str | None = None

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig | None = None) -> Suppressed:
        """Only the final result of each window, once it closes. The buffer must not emit
        early (``BufferConfig.unbounded()`` or a bounded one with ``shut_down_when_full()``)."""
        config = BufferConfig.unbounded() if buffer_config is None else buffer_config
        if not isinstance(config, BufferConfig):
            raise TypeError(f"buffer_config must be a BufferConfig, got {config!r}")
        if config.bounded and config.emits_early:
            raise ValueError(
                "Suppressed.until_window_closes needs a strict buffer that never emits early: "
                "use BufferConfig.unbounded() or add .shut_down_when_full()"
            )
        return cls(_WINDOW_CLOSE, config)

    @classmethod
    def until_time_limit(
        cls, time_limit: Duration, buffer_config: BufferConfig | None = None
    ) -> Suppressed:
        """The latest update of a key once ``time_limit`` of stream time has passed since its
        first buffered update."""
        config = BufferConfig.unbounded() if buffer_config is None else buffer_config
        if not isinstance(config, BufferConfig):
            raise TypeError(f"buffer_config must be a BufferConfig, got {config!r}")
        ms = to_ms(time_limit, "time limit")
        if ms < 0:
            raise ValueError(f"time limit must be >= 0 ms, got {ms}")
        return cls(_TIME_LIMIT, config, ms)

    def with_name(self, name: str) -> Suppressed:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        return replace(self, name=name)

    @property
    def until_window_close(self) -> bool:
        """Whether this is ``until_window_closes`` (final results only)."""
        return self.kind == _WINDOW_CLOSE
