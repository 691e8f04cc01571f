"""Runs the sessions app from Kafka to Kafka in its own process (for kill-and-restart tests).

Usage: python kafka_app_process.py BOOTSTRAP PREFIX CHECKPOINT_DIR MAX_RECORDS_PER_TRIGGER

The app's topics are the sessions topology's names with PREFIX on Kafka, its id PREFIX + "app".
"""

from __future__ import annotations

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


def main() -> None:
    bootstrap, prefix, checkpoint, per_trigger = sys.argv[1:5]
    app = sessions_app(bootstrap, prefix, checkpoint, int(per_trigger))
    app.start()
    print("started", flush=True)
    app.process_all_available()
    app.stop()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
