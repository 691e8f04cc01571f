"""A Spark Connect client process for tests/kafka/test_kafka_spark_connect.py: runs one app
over the server at ``argv[1]`` until its input is processed, prints ``app.metrics()`` as JSON.

    python connect_client.py sc://host:port file ROOT
    python connect_client.py sc://host:port kafka BOOTSTRAP PREFIX CHECKPOINT
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from kspark import io, serdes
from kspark.examples.sessions import generate_clicks, topology
from kspark.spark import StreamsApp

#: the clicks of the file app: generate_clicks(**FILE_CLICKS), 3 files, 2 partitions
FILE_CLICKS = {"n": 600, "users": 25, "seed": 9}


def file_app(spark, root: str, memory_sink: bool = False) -> StreamsApp:
    """The sessions example from memory-topic files to file sinks under ``root``."""
    clicks = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    clicks.send_all(list(generate_clicks(**FILE_CLICKS)), per_file=200)
    counts = (io.memory(serdes.SessionWindowed(serdes.String()), serdes.Long()) if memory_sink
              else io.files(os.path.join(root, "counts")))
    return StreamsApp(topology(), "sessions", {
        "clicks": clicks, "session-counts": counts,
        "session-pages": io.files(os.path.join(root, "pages"))},
        spark=spark, checkpoint_dir=os.path.join(root, "ck"))


def kafka_app(spark, bootstrap: str, prefix: str, checkpoint: str) -> StreamsApp:
    topics = {name: io.kafka(bootstrap, prefix + name, **({"max_records_per_trigger": 100}
                                                          if name == "clicks" else {}))
              for name in ("clicks", "session-counts", "session-pages")}
    return StreamsApp(topology(), prefix + "app", topics, spark=spark, checkpoint_dir=checkpoint)


def main() -> None:
    url, kind, *args = sys.argv[1:]
    spark = SparkSession.builder.remote(url).getOrCreate()
    if kind == "memory":
        try:
            file_app(spark, args[0], memory_sink=True).start()
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return
    app = file_app(spark, args[0]) if kind == "file" else kafka_app(spark, *args)
    app.start()
    try:
        app.process_all_available()
        print(json.dumps(app.metrics()))
    finally:
        app.stop()


if __name__ == "__main__":
    main()
