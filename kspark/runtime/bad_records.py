"""Source records that are no valid records (undecodable, negative timestamp): an error naming
where each is, or, with the handler ``log_and_continue``, skipped, counted and written to the
dead-letter topic (docs/semantics.md, "Errors and bad input")."""

from __future__ import annotations

from collections.abc import Callable

from kspark.config import LOG_AND_CONTINUE, StreamsConfig
from kspark.errors import StreamsError
from kspark.runtime.serialized import Output, OutputRecord, SourceRecord
from kspark.topology.topology import SourceNode


def skip_or_fail(
    config: StreamsConfig,
    rec: SourceRecord,
    node: SourceNode,
    reason: str,
    problem: str,
    dropped: Callable[[str, str], None],
    dead_letters: Output,
    cause: Exception | None = None,
) -> None:
    """Stop with an error naming where ``rec`` is, or with ``log_and_continue`` count it as
    ``dropped(reason, detail)`` and append it to ``dead_letters`` (if a dead-letter topic is
    set) with headers naming the problem and the origin."""
    where = (
        f"topic {rec.topic!r} partition {rec.partition} offset {rec.offset} "
        f"(source {node.name!r})"
    )
    if config.deserialization_handler != LOG_AND_CONTINUE:
        what = "Deserialization error" if reason == "deserialization-error" else "Invalid record"
        err = StreamsError(f"{what} at {where}: {problem}")
        err.located = True
        raise err from cause
    dropped(reason, f"skipped record at {where}: {problem}")
    if config.dead_letter_topic:
        headers = (
            *rec.headers,
            ("__kspark.error", problem.encode()),
            ("__kspark.origin", f"{rec.topic}/{rec.partition}/{rec.offset}".encode()),
        )
        dead_letters.append(
            OutputRecord(config.dead_letter_topic, rec.key, rec.value, rec.timestamp, headers)
        )
