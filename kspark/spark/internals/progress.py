"""Reading a streaming query's progress: whether its sources have caught up."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from kspark.spark.internals.kafka_ranges import LATEST
from kspark.spark.internals.kafka_source import SKIPPED
from kspark.spark.internals.tick_source import TICK_OFFSET


def wait_caught_up(query: Any, timeout: float) -> None:
    """Block until a micro-batch planned after this call left no data source behind (the tick
    source, which always has new input, left out); raise the query's exception if it fails,
    ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.time() + timeout
    start = time.time() * 1000
    while True:
        exc = query.exception()
        if exc is not None:
            raise exc
        progress = query.lastProgress
        if progress is not None and _parse_time(progress["timestamp"]) >= start and all(
                _caught_up(s) for s in progress["sources"] if not _is_tick_source(s)):
            return
        if time.time() > deadline:
            raise TimeoutError(f"input not processed within {timeout} s")
        time.sleep(0.1)


def _offsets(source: dict[str, Any], which: str) -> Any:
    offset = source.get(which)
    return json.loads(offset) if isinstance(offset, str) else offset


def _is_tick_source(source: dict[str, Any]) -> bool:
    """Whether ``source`` is the tick source: offsets ``{TICK_OFFSET: n}`` (a Kafka topic named
    like it has ``{topic: {partition: offset}}``)."""
    end = _offsets(source, "endOffset")
    return isinstance(end, dict) and len(end) == 1 and type(end.get(TICK_OFFSET)) is int


def _latest_and_end(source: dict[str, Any]) -> tuple[Any, Any]:
    """A source's latest and end offsets; for Kafka's range rows, which Spark asks for no
    latest offset, the latest its end offset carries (``kafka_ranges.LATEST``)."""
    latest, end = _offsets(source, "latestOffset"), _offsets(source, "endOffset")
    if latest is None and isinstance(end, dict) and isinstance(end.get(LATEST), dict):
        skipped = {k: v for k, v in end.items() if k == SKIPPED}
        return {**end[LATEST], **skipped}, {k: v for k, v in end.items() if k != LATEST}
    return latest, end


def _caught_up(source: dict[str, Any]) -> bool:
    """Whether a source's progress shows nothing left after the batch's end offset; a source
    that reports no latest offset (Spark's simple stream readers, e.g. the file range rows)
    has caught up once a micro-batch read nothing from it."""
    latest, end = _latest_and_end(source)
    if latest is None:
        return not source.get("numInputRows")
    return bool(latest == end)


def _parse_time(text: str) -> float:
    """Milliseconds of a streaming progress timestamp (``2026-11-21T12:00:00.000Z``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def source_lag(progress: dict[str, Any]) -> int | None:
    """How far the sources are behind after a micro-batch: records (Kafka: latest minus end
    offsets per partition) or files (file sources), summed; ``None`` if no source says."""
    total, known = 0, False
    for source in progress.get("sources", []):
        latest, end = _latest_and_end(source)
        if not isinstance(latest, dict) or not isinstance(end, dict):
            continue
        for name, value in latest.items():
            done = end.get(name)
            if isinstance(value, dict) and isinstance(done, dict):  # {topic: {partition: n}}
                total += sum(max(0, int(n) - int(done.get(p) or n)) for p, n in value.items())
                known = True
            elif isinstance(value, int) and isinstance(done, int):  # {"files": n}
                total += max(0, value - done)
                known = True
    return total if known else None
