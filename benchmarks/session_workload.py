"""What the session benchmarks share: the clickstream workload and the DSL session count."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import clickstream

from kspark import EmitStrategy, Materialized, SessionWindows, StreamsBuilder, serdes


def load_gen() -> ModuleType:
    """The workload generator (:mod:`clickstream`, beside this file)."""
    return clickstream


def session_count_topology(gap_ms: int, grace_ms: int, on_close: bool,
                           value_serde: Any = None) -> Any:
    """clicks -> session count per key (store ``session-counts``) -> topic ``sessions``."""
    builder = StreamsBuilder()
    sessions = (
        builder.stream("clicks", serdes.String(), value_serde or serdes.Json())
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap_ms, grace_ms))
    )
    if on_close:
        sessions = sessions.emit_strategy(EmitStrategy.on_window_close())
    (
        sessions.count(Materialized("session-counts"))
        .to_stream()
        .to("sessions", serdes.SessionWindowed(serdes.String()), serdes.Long())
    )
    return builder.build()
