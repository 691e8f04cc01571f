"""Runs the sessions topology on its own local Spark that retries failed tasks (``local[2,3]``),
with a peek that kills its own Python worker (SIGKILL) at one record the first time it sees it.

Usage: python worker_kill_run.py INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR MARKER_FILE KILL_USER
"""

from __future__ import annotations

import os
import signal
import sys

from kspark import StreamsBuilder, io, serdes
from kspark.examples.sessions import GAP_MS, GRACE_MS
from kspark.spark import StreamsApp
from kspark.spark.session import local_spark
from kspark.windows import SessionWindows


def topology(marker: str | None, kill_user: str | None):
    """clicks -> per-user session counts; with ``marker``, the worker that first processes a
    click of ``kill_user`` dies (once: the marker file says it happened)."""

    def kill_once(user, click):
        if marker and user == kill_user and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)

    builder = StreamsBuilder()
    (builder.stream("clicks", serdes.String(), serdes.Json()).peek(kill_once)
     .group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(GAP_MS, GRACE_MS))
     .count().to_stream()
     .to("counts", serdes.SessionWindowed(serdes.String()), serdes.Long()))
    return builder.build()


def main() -> None:
    input_dir, output_dir, checkpoint, marker, kill_user = sys.argv[1:6]
    spark = local_spark("local[2,3]")  # a failed task is tried up to 3 times, as on a cluster
    app = StreamsApp(topology(marker, kill_user), "worker-kill",
                     {"clicks": io.files(input_dir, format="kspark", max_files_per_trigger=2),
                      "counts": io.files(output_dir, format="kspark")},
                     spark=spark, checkpoint_dir=checkpoint)
    app.start()
    try:
        app.process_all_available()
        print("metrics", app.metrics(), flush=True)
    finally:
        app.stop()


if __name__ == "__main__":
    main()
