"""Application B of the store-reuse tests in a process of its own (for kill-while-restoring
tests): a read-only window store restored from another application's changelog topic.

Usage: python store_reader_process.py BOOTSTRAP CHANGELOG APP_ID CHECKPOINT_DIR PER_TRIGGER

It restores what the changelog holds, a micro-batch of at most PER_TRIGGER records at a time,
prints "finished" and stops.
"""

from __future__ import annotations

import sys

DAY = 86_400_000
STORE = "event-counts"
RETENTION = 30 * DAY


def reader_topology(changelog: str):
    from kspark import Stores, Topology, serdes

    return Topology().add_read_only_state_store(
        Stores.window_store(STORE, RETENTION, DAY, key_serde=serdes.String(),
                            value_serde=serdes.Long()), changelog)


def reader_app(bootstrap: str, changelog: str, app_id: str, checkpoint: str,
               per_trigger: int | None = None, spark=None):
    from kspark import io
    from kspark.spark import StreamsApp

    return StreamsApp(reader_topology(changelog), app_id,
                      {changelog: io.kafka(bootstrap, max_records_per_trigger=per_trigger)},
                      spark=spark, checkpoint_dir=checkpoint)


def main() -> None:
    bootstrap, changelog, app_id, checkpoint, per_trigger = sys.argv[1:6]
    app = reader_app(bootstrap, changelog, app_id, checkpoint, int(per_trigger)).start()
    print("started", flush=True)
    app.process_all_available()
    app.stop()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
