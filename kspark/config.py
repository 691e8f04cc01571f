"""Application settings: Kafka Streams' names where one exists.

Every setting kspark knows is declared once (:data:`SETTINGS`) with its type. An unknown name is
refused with the nearest known one; a value of the wrong type names the setting and the type it
needs. Other ``spark.*`` names go to Spark and ``kafka.*`` names to Kafka clients unchecked,
except kspark's own ``spark.kspark.*`` settings, which are checked like the others.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kspark.errors import ConfigError
from kspark.serdes import Json, Serde, as_serde

FAIL = "fail"
LOG_AND_CONTINUE = "log_and_continue"


def _whole(name: str, value: Any, minimum: int = 0) -> int:
    """A whole-number setting given as an int or as its text (``"16"``, as properties give)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {number}")
    return number


def _choice(*allowed: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        text = str(value).lower() if isinstance(value, str | bool) else None
        if text not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        return text

    return check


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    return lambda name, value: None if value is None else check(name, value)


def _serde(name: str, value: Any) -> Serde:
    try:
        return as_serde(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a Serde (e.g. serdes.String()): {exc}") from None


@dataclass(frozen=True)
class Setting:
    """A setting kspark knows: its name, the :class:`StreamsConfig` field it fills (``None``
    for ``spark.kspark.*`` settings, kept in ``extra``) and how its value is checked."""

    name: str
    attr: str | None
    check: Callable[[str, Any], Any]


SETTINGS = {s.name: s for s in (
    Setting("application.id", "application_id", _text),
    Setting("default.key.serde", "default_key_serde", _serde),
    Setting("default.value.serde", "default_value_serde", _serde),
    Setting("default.deserialization.exception.handler", "deserialization_handler",
            _choice(FAIL, LOG_AND_CONTINUE)),
    Setting("errors.dead.letter.queue.topic.name", "dead_letter_topic", _optional(_text)),
    Setting("state.buckets", "state_buckets", lambda n, v: _whole(n, v, 1)),
    Setting("state.buckets.in.memory", "state_buckets_in_memory",
            _optional(lambda n, v: _whole(n, v, 1))),
    Setting("state.inline.max.bytes", "state_inline_max_bytes", _whole),
    Setting("task.batch.max.records", "task_batch_max_records",
            _optional(lambda n, v: _whole(n, v, 1))),
    Setting("window.close.on.idle.ms", "close_on_idle_ms", _optional(_whole)),
    Setting("state.changelog.dir", "changelog_dir", _optional(_text)),
    Setting("task.timeout.ms", "task_timeout_ms", _whole),
    Setting("spark.kspark.partitions", None, lambda n, v: _whole(n, v, 1)),
    Setting("spark.kspark.tick.ms", None, lambda n, v: _whole(n, v, 1)),
    Setting("spark.kspark.files.read.in.stage", None, _choice("auto", "true", "false")),
    Setting("spark.kspark.kafka.read.in.stage", None, _choice("true", "false")),
    Setting("spark.kspark.sink.in.stage", None, _choice("true", "false")),
)}
_BY_ATTR = {s.attr: s for s in SETTINGS.values() if s.attr}


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
    #: most buckets of a store a task holds in memory at once (the rest wait in local files
    #: until the batch is written), or None: no limit
    state_buckets_in_memory: int | None = None
    #: on Spark, a task whose buckets are at most this many bytes (pickled) in all keeps them
    #: with its task state in one value of Spark state (0: never), and so does one whose
    #: micro-batch changed at least half of them, up to 16 times this; docs/semantics.md §6
    state_inline_max_bytes: int = 1 << 20
    #: a task runs a micro-batch's records of one topic at most this many at a time (its state
    #: held in memory in between, committed once): bounds the batch's working set, not its
    #: results (docs/semantics.md §6); None: all at once
    task_batch_max_records: int | None = None
    #: opt-in: windows closed after the input of a task is idle this long (wall clock), or None
    close_on_idle_ms: int | None = None
    #: without Kafka: a directory where each logged store's changelog topic is kept as files
    #: (``<dir>/<application.id>-<store>-changelog``), unless ``topics`` places it elsewhere
    changelog_dir: str | None = None
    #: how long a source waits for an unreachable Kafka cluster before the app stops (Kafka
    #: Streams' ``task.timeout.ms``: 5 minutes)
    task_timeout_ms: int = 300_000
    #: ``spark.*`` and ``kafka.*`` settings (kspark's ``spark.kspark.*`` ones checked)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, config: StreamsConfig | dict[str, Any] | None, **defaults: Any) -> StreamsConfig:
        """Settings from ``config`` (Kafka-style names, or the field names) over ``defaults``
        (field names). Raises :class:`~kspark.errors.ConfigError` naming the setting."""
        if isinstance(config, StreamsConfig):
            return config
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in {**defaults, **(config or {})}.items():
            setting = SETTINGS.get(key) or _BY_ATTR.get(key)
            if setting is None:
                if key.startswith(("spark.", "kafka.")) and not key.startswith("spark.kspark."):
                    extra[key] = value
                    continue
                raise ConfigError(_unknown(key))
            checked = setting.check(setting.name, value)
            if setting.attr is None:
                extra[setting.name] = checked
            else:
                values[setting.attr] = checked
        return cls(**values, extra=extra)


def _unknown(key: str) -> str:
    names = [*SETTINGS, *_BY_ATTR]
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    known = ", ".join(SETTINGS)
    return f"unknown setting {key!r}: {hint}known settings: {known}; other spark.* and kafka.*"
