"""The processor, the store and the result's window size of each kind of window, for the
windowed aggregations of grouped and cogrouped streams."""

from __future__ import annotations

from typing import Any

from kspark.dsl.internals.windowing.session import (
    SessionWindowAggregateProcessor,
    session_store_builder,
)
from kspark.dsl.internals.windowing.sliding import (
    SlidingWindowAggregateProcessor,
    sliding_window_store_builder,
)
from kspark.dsl.internals.windowing.time_windows import (
    TimeWindowAggregateProcessor,
    time_window_store_builder,
)
from kspark.windows import SlidingWindows, TimeWindows

__all__ = ["SessionWindowAggregateProcessor", "session_store_builder", "timed"]


def timed(windows: TimeWindows | SlidingWindows) -> tuple[Any, Any, int]:
    """The aggregate processor class, the store builder function and the window size (the
    time difference for sliding windows) of time or sliding ``windows``."""
    if isinstance(windows, SlidingWindows):
        return (SlidingWindowAggregateProcessor, sliding_window_store_builder,
                windows.time_difference_ms)
    return TimeWindowAggregateProcessor, time_window_store_builder, windows.size_ms
