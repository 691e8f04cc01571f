"""The sessions job on kspark (``kspark.examples.sessions``, emit on window close) from a Kafka
topic to Kafka topics, in a process of its own for ``benchmarks/peers.py``: kspark's local
session (as ``spark=None`` starts it), an optional warm-up run on other topics first, then the
measured run from ``StreamsApp.start`` to its last micro-batch's Kafka transaction committed.

    .venv/bin/python benchmarks/peers/kspark_sessions.py --bootstrap HOST:PORT --input clicks \\
        --counts kspark-session-counts --pages kspark-session-pages [--warm-up-input TOPIC]

``--live`` (``benchmarks/peers_latency.py``): the example with sessions emitted on update
(through its caches, flushed at each micro-batch's commit), micro-batches back to back (no
trigger interval), until SIGTERM; with ``--job counts``, a running count of each user's clicks
instead, written at every micro-batch (String key, Long value).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import protocol

from kspark import Materialized, StreamsBuilder, io, serdes
from kspark.examples.sessions import topology
from kspark.io.kafka import SOURCES
from kspark.spark import StreamsApp
from kspark.spark.session import kspark_spark_conf, local_spark


def run(spark: Any, bootstrap: str, source: str, counts: str, pages: str, app_id: str,
        work: str, per_trigger: int | None = None, config: dict[str, str] | None = None,
        reader: str = "auto") -> StreamsApp:
    app = StreamsApp(topology(), app_id, {
        "clicks": io.kafka(bootstrap, topic=source, max_records_per_trigger=per_trigger,
                           source=reader),
        "session-counts": io.kafka(bootstrap, topic=counts),
        "session-pages": io.kafka(bootstrap, topic=pages),
    }, spark=spark, config=config, checkpoint_dir=os.path.join(work, app_id))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return app


def counts_topology() -> Any:
    """clicks -> the number of clicks of each user so far (store ``user-counts``)."""
    builder = StreamsBuilder()
    (builder.stream("clicks", serdes.String(), serdes.Json())
     .group_by_key(serdes.String(), serdes.Json()).count(Materialized("user-counts"))
     .to_stream().to("user-counts", serdes.String(), serdes.Long()))
    return builder.build()


def live(spark: Any, args: Any, work: str, config: dict[str, str]) -> None:
    """The live job (sessions emitted on update, or the running counts), from the input's
    start, until SIGTERM."""
    topics = {"clicks": io.kafka(args.bootstrap, topic=args.input, source=args.source)}
    if args.job == "counts":
        job = counts_topology()
        topics["user-counts"] = io.kafka(args.bootstrap, topic=args.counts)
    else:
        job = topology(emit_on_close=False)
        topics["session-counts"] = io.kafka(args.bootstrap, topic=args.counts)
        topics["session-pages"] = io.kafka(args.bootstrap, topic=args.pages)
    app = StreamsApp(job, "peers-kspark-live", topics, spark=spark, config=config,
                     checkpoint_dir=os.path.join(work, "live"))
    app.start()
    protocol.live()
    try:
        protocol.until_stopped()
    finally:
        app.stop()


def main() -> None:
    options = protocol.parser()
    options.add_argument("--master", default="local[2]")
    options.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                         help="a Spark setting over kspark's local session's (a key not "
                         "starting with 'spark.': a kspark setting of the app)")
    options.add_argument("--source", choices=SOURCES, default="auto",
                         help="what reads the clicks: kspark's Kafka source or Spark's "
                         "connector (kspark.io.kafka's source=)")
    options.add_argument("--per-trigger", type=int, default=None,
                         help="at most this many clicks a micro-batch (default: all available)")
    args = options.parse_args()
    settings = dict(setting.split("=", 1) for setting in args.conf)
    extra = {k: v for k, v in settings.items() if k.startswith("spark.")}
    streams = {k: v for k, v in settings.items() if not k.startswith("spark.")}
    conf = {**kspark_spark_conf(), **extra}
    print(f"config: kspark, Spark {args.master}, RocksDB state with changelog checkpointing, "
          f"Kafka sink transactional (exactly once), {conf['spark.sql.shuffle.partitions']} "
          f"shuffle partitions, JVM {conf['spark.driver.defaultJavaOptions']}"
          + "".join(f", {k}={v}" for k, v in settings.items())
          + f", clicks read by source={args.source!r}"
          + (f", at most {args.per_trigger:,} clicks a micro-batch" if args.per_trigger else "")
          + ((", a running count per user" if args.job == "counts" else
              ", sessions emitted on update") + ", micro-batches back to back"
             if args.live else ""),
          flush=True)
    work = tempfile.mkdtemp(prefix="peers-kspark-")
    spark = local_spark(args.master, extra)
    if args.live:
        live(spark, args, work, streams)
        return
    app, elapsed, warm_up_s = protocol.measure(
        args, lambda source, counts, pages, tag: run(
            spark, args.bootstrap, source, counts, pages, f"peers-kspark-{tag}", work,
            args.per_trigger, streams, args.source))
    metrics = app.metrics()
    protocol.result(elapsed=elapsed, warm_up_s=warm_up_s,
                    dropped=metrics.get("dropped-records-total", 0) // 2)


if __name__ == "__main__":
    main()
