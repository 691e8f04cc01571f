"""What the batch tests share: the warnings of a fast path that aborted part-way through a batch
(``run_task_batch`` runs the batch again record by record and logs why on ``kspark.runtime``).
Such a run still gives the right results, so the tests comparing the paths check this too."""

from __future__ import annotations

import logging


class Aborts(logging.Handler):
    """The aborts logged while in a ``with`` (a warning the first time for each cause, DEBUG
    after that: both are taken)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self.logger = logging.getLogger("kspark.runtime")

    def emit(self, record: logging.LogRecord) -> None:
        if "runs again record by record" in record.getMessage():
            self.messages.append(record.getMessage())

    def __enter__(self) -> Aborts:
        self.saved_level, self.logger.level = self.logger.level, logging.DEBUG
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.saved_level)
