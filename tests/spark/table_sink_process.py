"""The sessions example with a Parquet table sink (counts) and a function sink (pages), run in
its own process for kill-and-restart tests.

Usage: python table_sink_process.py INPUT_DIR WORK_DIR
"""

from __future__ import annotations

import json
import os
import sys

TABLE = "restart_session_counts"


class Appender:
    """A function sink that is not idempotent: it appends each batch it is given to a file,
    one line per call (batch id and rows), so a batch given twice shows twice."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, df, batch_id: int) -> None:
        rows = [(r.key, r.window_start_ms, r.window_end_ms, r.value, r.timestamp_ms)
                for r in df.collect()]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"batch": batch_id, "rows": rows}) + "\n")
            f.flush()
            os.fsync(f.fileno())


def app(input_dir: str, work: str, spark=None):
    from kspark import io
    from kspark.examples.sessions import topology
    from kspark.spark import StreamsApp, foreach_batch, table

    return StreamsApp(topology(), "table-sinks", {
        "clicks": io.files(input_dir, format="kspark", partitions=2, max_files_per_trigger=1),
        "session-counts": table(TABLE, os.path.join(work, "table")),
        "session-pages": foreach_batch(Appender(os.path.join(work, "pages.jsonl"))),
    }, spark=spark, checkpoint_dir=os.path.join(work, "ck"))


def main() -> None:
    input_dir, work = sys.argv[1:3]
    running = app(input_dir, work).start()
    print("started", flush=True)
    running.process_all_available()
    running.stop()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
