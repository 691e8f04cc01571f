"""What the session benchmarks share: the shared workload generator and the DSL session count."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from kspark import EmitStrategy, Materialized, SessionWindows, StreamsBuilder, serdes

GEN = os.environ.get("KSPARK_BENCH_GEN", "/work/shared/bench/gen.py")


def load_gen() -> Any:
    """The shared workload generator (``/work/shared/bench/gen.py``), imported by path."""
    spec = importlib.util.spec_from_file_location("kspark_bench_gen", GEN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
