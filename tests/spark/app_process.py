"""Runs one StreamsApp in its own process (for kill-and-restart tests).

Usage: python app_process.py MODULE:FACTORY INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR
FACTORY() returns (topology, input_topic, output_topic, key_serde_name).
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    spec, input_dir, output_dir, checkpoint = sys.argv[1:5]
    module, _, factory = spec.partition(":")
    topology, in_topic, out_topic = getattr(importlib.import_module(module), factory)()
    from kspark import io
    from kspark.spark import StreamsApp

    app = StreamsApp(
        topology,
        "restart-app",
        {
            in_topic: io.files(input_dir, format="kspark", max_files_per_trigger=1),
            out_topic: io.files(output_dir, format="jsonl"),
        },
        checkpoint_dir=checkpoint,
    )
    app.start()
    print("started", flush=True)
    app.process_all_available()
    app.stop()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
