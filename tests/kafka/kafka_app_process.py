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
checkpoint (it prints "dying after batch N"). The transactions run in Spark's Python workers:
these hooks are installed there (worker_hooks/sitecustomize.py). If the app fails, it prints
"failed: " and the first line of the error, and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys


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


def worker_hooks(**hooks) -> None:
    """Install the test hooks of worker_hooks/sitecustomize.py in the Spark this process starts
    (its Python workers run the sink's transactions)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_hooks")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p)
    os.environ["KSPARK_TEST_HOOKS"] = json.dumps({**hooks, "stdout": os.getpid()})


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
    parser.add_argument("--conf", action="append", default=[], help="a kspark setting k=v")
    args = parser.parse_args()
    if args.hold_batch is not None or args.die_after_batch is not None:
        worker_hooks(hold_batch=args.hold_batch, hold_file=args.hold_file,
                     die_after_batch=args.die_after_batch)
    app = sessions_app(args.bootstrap, args.prefix, args.checkpoint, args.per_trigger,
                       config=dict(kv.split("=", 1) for kv in args.conf) or None)
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
