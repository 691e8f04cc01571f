"""Application settings: Kafka Streams' names where one exists."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kspark.serdes import Json, Serde, as_serde

FAIL = "fail"
LOG_AND_CONTINUE = "log_and_continue"

_KEYS = {
    "application.id": "application_id",
    "default.key.serde": "default_key_serde",
    "default.value.serde": "default_value_serde",
    "default.deserialization.exception.handler": "deserialization_handler",
    "errors.dead.letter.queue.topic.name": "dead_letter_topic",
    "state.buckets": "state_buckets",
    "window.close.on.idle.ms": "close_on_idle_ms",
    "state.changelog.dir": "changelog_dir",
}


@dataclass
class StreamsConfig:
    """Validated settings. Build it from a dict of Kafka-style names with :meth:`of`."""

    application_id: str = "kspark-app"
    default_key_serde: Serde = field(default_factory=Json)
    default_value_serde: Serde = field(default_factory=Json)
    #: "fail" (default) stops on an undecodable record; "log_and_continue" skips and counts it
    deserialization_handler: str = FAIL
    #: where skipped undecodable records are written (raw bytes), if set
    dead_letter_topic: str | None = None
    #: number of state buckets per store and task
    state_buckets: int = 16
    #: opt-in: windows closed after the input of a task is idle this long (wall clock), or None
    close_on_idle_ms: int | None = None
    #: without Kafka: a directory where each logged store's changelog topic is kept as files
    #: (``<dir>/<application.id>-<store>-changelog``), unless ``topics`` places it elsewhere
    changelog_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, config: StreamsConfig | dict[str, Any] | None, **defaults: Any) -> StreamsConfig:
        if isinstance(config, StreamsConfig):
            return config
        values = dict(defaults)
        extra = {}
        for key, value in (config or {}).items():
            attr = _KEYS.get(key, key if key in cls.__dataclass_fields__ else None)
            if attr is None:
                if not key.startswith(("spark.", "kafka.")):
                    known = ", ".join(sorted(_KEYS))
                    raise ValueError(f"unknown config {key!r}; known: {known}, spark.*, kafka.*")
                extra[key] = value
                continue
            values[attr] = value
        out = cls(**values, extra=extra)
        out.default_key_serde = as_serde(out.default_key_serde)
        out.default_value_serde = as_serde(out.default_value_serde)
        if out.deserialization_handler not in (FAIL, LOG_AND_CONTINUE):
            raise ValueError(
                "default.deserialization.exception.handler must be 'fail' or 'log_and_continue', "
                f"got {out.deserialization_handler!r}"
            )
        out.state_buckets = _whole("state.buckets", out.state_buckets)
        if out.state_buckets < 1:
            raise ValueError(f"state.buckets must be >= 1, got {out.state_buckets}")
        if out.close_on_idle_ms is not None:
            out.close_on_idle_ms = _whole("window.close.on.idle.ms", out.close_on_idle_ms)
        return out


def _whole(name: str, value: Any) -> int:
    """A whole-number setting given as an int or as its text (``"16"``, as properties give)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
