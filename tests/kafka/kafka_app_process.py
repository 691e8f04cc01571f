"""Runs the sessions app from Kafka to Kafka in its own process (for kill-and-restart tests).

Usage: python kafka_app_process.py BOOTSTRAP PREFIX CHECKPOINT_DIR MAX_RECORDS_PER_TRIGGER
       [--until-file FILE] [--hold-batch N --hold-file FILE] [--die-after-batch N]

The app's topics are the sessions topology's names with PREFIX on Kafka, its id PREFIX + "app".
It processes the input available and stops; with ``--until-file`` it keeps running (its query
reading new input as it comes) until FILE exists. With ``--hold-batch`` the Kafka transaction of
the first batch at or after N that writes anything is held open, its records sent, until
``--hold-file`` exists (it prints "holding batch N"). With ``--die-after-batch`` the process
kills itself (SIGKILL, with its Spark) right after the Kafka transaction of the first batch at or
after N that writes anything is committed, before Spark records the batch as done in its
checkpoint (it prints "dying after batch N"). If the app fails, it prints
"failed: " and the first line of the error, and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time


def sessions_app(bootstrap: str, prefix: str, checkpoint: str, per_trigger: int | None = None,
                 spark=None, config=None, **clicks_options):
    from kspark import io
    from kspark.examples.sessions import topology
    from kspark.spark import StreamsApp

    topics = {
        "clicks": io.kafka(bootstrap, f"{prefix}clicks", max_records_per_trigger=per_trigger,
                           **clicks_options),
        "session-counts": io.kafka(bootstrap, f"{prefix}session-counts"),
        "session-pages": io.kafka(bootstrap, f"{prefix}session-pages"),
    }
    if config and "errors.dead.letter.queue.topic.name" in config:
        dead = config["errors.dead.letter.queue.topic.name"]
        topics[dead] = io.kafka(bootstrap, f"{prefix}{dead}")
    return StreamsApp(topology(), f"{prefix}app", topics, spark=spark, config=config,
                      checkpoint_dir=checkpoint)


def hold_transactions(from_batch: int, release_file: str) -> None:
    """Hold the first transaction at or after batch ``from_batch`` open, with its records and
    marker sent to the broker, until ``release_file`` exists (an instance stalled mid-commit)."""
    from kspark.kafka.sink import TransactionalWriter

    produce = TransactionalWriter._produce
    held = []

    def holding(self, topic, rows):
        count = produce(self, topic, rows)
        if topic == self.markers and not held:
            batch = json.loads(rows[0][1])["batch"]
            if batch >= from_batch:
                held.append(batch)
                self._producer.flush(30)
                print(f"holding batch {batch}", flush=True)
                while not os.path.exists(release_file):
                    time.sleep(0.05)
        return count

    TransactionalWriter._produce = holding


def die_after_commit(from_batch: int) -> None:
    """SIGKILL this process group right after the first Kafka commit of a batch at or after
    ``from_batch`` (the moment between Kafka's commit and Spark's)."""
    from kspark.kafka.sink import TransactionalWriter

    commit = TransactionalWriter.commit

    def committing(self, run, batch_id):
        count = commit(self, run, batch_id)
        if count and batch_id >= from_batch:
            print(f"dying after batch {batch_id}", flush=True)
            os.killpg(os.getpgid(0), signal.SIGKILL)
        return count

    TransactionalWriter.commit = committing


def error_line(exc: BaseException) -> str:
    """The first line of the error's message; of the Python error within for a query that
    failed in a micro-batch (Spark wraps it: "... Traceback ... StreamsError: ...")."""
    lines = str(exc).strip().splitlines()
    found = [line for line in lines if re.match(r"[\w.]+(Error|Exception): ", line)]
    ours = [line for line in found if line.startswith("kspark.")]
    return (ours or found)[-1] if found and "Traceback" in str(exc) else lines[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "prefix", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("per_trigger", type=int)
    parser.add_argument("--until-file")
    parser.add_argument("--hold-batch", type=int)
    parser.add_argument("--hold-file")
    parser.add_argument("--die-after-batch", type=int)
    args = parser.parse_args()
    if args.hold_batch is not None:
        hold_transactions(args.hold_batch, args.hold_file)
    if args.die_after_batch is not None:
        die_after_commit(args.die_after_batch)
    app = sessions_app(args.bootstrap, args.prefix, args.checkpoint, args.per_trigger)
    try:
        app.start()
        print("started", flush=True)
        if args.until_file:
            while not os.path.exists(args.until_file):
                app.await_termination(0.2)  # raises if the query failed
        app.process_all_available()
        app.stop()
    except Exception as exc:
        print(f"failed: {error_line(exc)}", flush=True)
        print(exc, file=sys.stderr, flush=True)
        sys.exit(1)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
