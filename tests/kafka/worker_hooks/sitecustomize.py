"""Test hooks in Spark's Python workers (where the sink's Kafka transactions run): loaded by
every Python process whose path holds this directory (kafka_app_process.py puts it on the
PYTHONPATH its Spark inherits), active only with ``KSPARK_TEST_HOOKS`` set (JSON):

- ``hold_batch``, ``hold_file``: the first transaction at or after batch ``hold_batch`` that
  writes anything is held open, its records and marker sent, until ``hold_file`` exists;
- ``die_after_batch``: right after the first commit of a batch at or after it, the app's
  process group is killed (SIGKILL) before Spark records the batch;
- ``stdout``: the app process's pid; "holding batch N of writer ID" and "dying after batch N"
  go to its standard output, where the test reads them.
"""

from __future__ import annotations

import json
import os


def _say(pid: int, line: str) -> None:
    with open(f"/proc/{pid}/fd/1", "a") as out:
        out.write(line + "\n")


def _install(hooks: dict) -> None:
    import signal
    import time

    from kspark.kafka.sink import TransactionalWriter

    pid = int(hooks["stdout"])
    if hooks.get("hold_batch") is not None:
        produce = TransactionalWriter._produce
        hold_from, release = int(hooks["hold_batch"]), hooks["hold_file"]
        claim = release + ".claimed"  # one worker holds, once

        def holding(self, topic, rows):
            count = produce(self, topic, rows)
            if topic == self.markers:
                batch = json.loads(rows[0][1])["batch"]
                if batch >= hold_from:
                    try:
                        os.close(os.open(claim, os.O_CREAT | os.O_EXCL))
                    except FileExistsError:
                        return count
                    self._producer.flush(30)
                    _say(pid, f"holding batch {batch} of writer {self.transactional_id}")
                    while not os.path.exists(release):
                        time.sleep(0.05)
            return count

        TransactionalWriter._produce = holding
    if hooks.get("die_after_batch") is not None:
        commit = TransactionalWriter.commit
        die_from = int(hooks["die_after_batch"])

        def committing(self, run, batch_id):
            count = commit(self, run, batch_id)
            if count and batch_id >= die_from:
                _say(pid, f"dying after batch {batch_id}")
                os.killpg(os.getpgid(pid), signal.SIGKILL)  # the app, its JVM and workers
            return count

        TransactionalWriter.commit = committing


if os.environ.get("KSPARK_TEST_HOOKS"):
    _install(json.loads(os.environ["KSPARK_TEST_HOOKS"]))
