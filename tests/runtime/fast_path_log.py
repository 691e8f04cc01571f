"""What the batch tests share: the warnings of a fast path that aborted part-way through a batch
(``run_task_batch`` runs the batch again record by record and logs why on ``kspark.runtime``).
Such a run still gives the right results, so the tests comparing the paths check this too."""

from __future__ import annotations

import logging


class Aborts(logging.Handler):
    """The abort warnings logged while in a ``with``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger("kspark.runtime")

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> Aborts:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
