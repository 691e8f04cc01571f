"""What the batch tests share: the lines a kspark logger logs while a test runs a batch. A fast
path that aborts part-way through a batch runs it again record by record and logs why on
``kspark.runtime``; such a run still gives the right results, so the tests comparing the paths
check its log too. The drop log gives each dropped record's detail at DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Callable


class LogLines(logging.Handler):
    """The messages of logger ``name`` that ``keep`` accepts, logged while in a ``with`` (the
    logger's level lowered to DEBUG meanwhile)."""

    def __init__(self, name: str, keep: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self.logger = logging.getLogger(name)
        self.keep = keep

    def emit(self, record: logging.LogRecord) -> None:
        if self.keep(record):
            self.messages.append(record.getMessage())

    def __enter__(self) -> LogLines:
        self.saved_level, self.logger.level = self.logger.level, logging.DEBUG
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.saved_level)


def aborts() -> LogLines:
    """The fast path's aborts (a warning the first time for each cause, DEBUG after that)."""
    return LogLines("kspark.runtime", lambda r: "runs again record by record" in r.getMessage())


def drop_details() -> LogLines:
    """The detail of each dropped record (the drop log's DEBUG lines)."""
    return LogLines("kspark.task", lambda r: r.levelno == logging.DEBUG)
