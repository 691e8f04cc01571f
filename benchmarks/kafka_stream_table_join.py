"""Benchmark: a stream-table join on the main job's path, Kafka to Kafka: ``clicks.left_join(
profiles, joiner)`` on local Spark, both read from topics of the embedded Apache Kafka broker
(``kspark.kafka.EmbeddedBroker``) and the result written back to a topic exactly once (kspark's
transactional Kafka sink), measured from a cold start and on a running job.

    .venv/bin/python benchmarks/kafka_stream_table_join.py --records 1000000 --table-rows 100000
    .venv/bin/python benchmarks/kafka_stream_table_join.py --start running --warm-up 100000

The input is produced once, before anything is measured: topic ``profiles`` (4 partitions) gets
``--table-rows`` rows (String key ``u<n>``, JSON ``{"tier": ..., "country": ...}``), then topic
``clicks`` (4 partitions, co-partitioned) ``--records`` clicks (JSON ``{"id": i, "page": ...}``)
of users drawn uniformly from ``--users`` (1.1 x the table's rows by default, so about one click
in eleven finds no profile), every click later than every row. The topology::

    profiles = builder.table("profiles", String, Json, Materialized("profiles"))
    clicks.left_join(profiles, joiner).to("enriched", String, Json)

with ``joiner(click, profile) = {"id", "page" of the click, "tier" of the profile or None}``.
The table's store is logged (its changelog topic on the broker, written in the same
transactions), as Kafka Streams keeps a source table's store without the source-topic
optimization.

- ``cold``: the Spark session's first query (its JVM is up already, as in
  ``kafka_end_to_end.py``): records/s = the clicks over the time from ``StreamsApp.start()``
  to the end of ``process_all_available()`` (the last micro-batch's Kafka transactions
  committed);
- ``running``: first the same job on topics of its own (``--warm-up`` other clicks and a tenth
  as many profiles) in the same Spark session, unmeasured, as ``kafka_end_to_end.py
  throughput --warm-up`` warms up, then the measured run with a new application id (a fresh
  checkpoint) from the input's beginning;
- ``both`` (the default): ``cold`` then ``running`` in one Spark session.

After each run its output topic is read back (``read_committed``) and checked: one record per
click (none missing, none twice), each in its key's partition and with the profile the table
held for its user (``None`` for a user without one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import Any

from kafka_job import PARTITIONS, make_producer, send
from kafka_streams_anchor import prepare_coordinators
from machine import Steal, load_text
from pure_python import core_mode
from spark_engines import run_app, session_text
from spark_stages import UI_CONF, print_stage_summary, stage_ids

from kspark import Materialized, StreamsBuilder, io, serdes
from kspark.hashing import kafka_partition
from kspark.kafka import EmbeddedBroker, TopicSpec, ensure_topics
from kspark.spark import StreamsApp
from kspark.spark.session import local_spark

BASE_TS = 1_700_000_000_000
TIERS = ("free", "plus", "pro", "gold")
COUNTRIES = ("DE", "FR", "US", "JP", "BR")


def enrich(click: dict, profile: dict | None) -> dict:
    """The joiner (defined in the script: it goes to Spark's Python workers by value)."""
    return {"id": click["id"], "page": click["page"],
            "tier": None if profile is None else profile["tier"]}


def topology(table: str, stream: str, output: str) -> Any:
    builder = StreamsBuilder()
    profiles = builder.table(table, serdes.String(), serdes.Json(), Materialized("profiles"))
    (builder.stream(stream, serdes.String(), serdes.Json())
     .left_join(profiles, enrich)
     .to(output, serdes.String(), serdes.Json()))
    return builder.build()


def profile(i: int) -> dict:
    return {"tier": TIERS[i % len(TIERS)], "country": COUNTRIES[i % len(COUNTRIES)]}


def produce(bootstrap: str, table: str, stream: str, rows: int, clicks: int, users: int,
            seed: int) -> list[int]:
    """``rows`` profiles to ``table``, then ``clicks`` clicks to ``stream``; the user of each
    click, by click id."""
    import numpy as np

    ensure_topics(bootstrap, [TopicSpec(table, PARTITIONS), TopicSpec(stream, PARTITIONS)])
    producer = make_producer(bootstrap)
    for i in range(rows):
        send(producer, f"u{i}", profile(i), BASE_TS + i, topic=table)
    who = np.random.default_rng(seed).integers(0, users, clicks).tolist()
    start = BASE_TS + rows + 1_000
    for i, user in enumerate(who):
        send(producer, f"u{user}", {"id": i, "page": f"/p{i % 50}"}, start + i, topic=stream)
    producer.flush(300)
    return who


def run(spark: Any, bootstrap: str, workdir: str, app_id: str, table: str, stream: str,
        output: str, per_trigger: int | None, config: dict[str, str]) -> dict[str, Any]:
    """The job from the topics' beginning to ``output``; its figures."""
    topics = {table: io.kafka(bootstrap), stream: io.kafka(bootstrap,
                                                            max_records_per_trigger=per_trigger),
              output: io.kafka(bootstrap, partitions=PARTITIONS)}
    app = StreamsApp(topology(table, stream, output), app_id, topics, spark=spark,
                     checkpoint_dir=os.path.join(workdir, f"{app_id}-checkpoint"), config=config)
    steal = Steal()
    elapsed, progress, metrics = run_app(app)
    progress = [p for p in progress if p["numInputRows"]]
    batches_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return {"elapsed": elapsed, "batches_s": batches_s, "progress": progress,
            "metrics": metrics, "steal": Steal.text(steal.fraction()), "load": load_text()}


def verify(bootstrap: str, output: str, who: list[int], rows: int) -> str:
    """Read ``output`` back (read_committed) and check it against the input."""
    from kspark.kafka.reader import read_to_end, wait_settled

    wait_settled(bootstrap, [output])
    seen = [0] * len(who)
    wrong_profile = wrong_partition = extra = 0
    for m in read_to_end(bootstrap, output):
        value = json.loads(m.value())
        i = value["id"]
        if not 0 <= i < len(who):
            extra += 1
            continue
        seen[i] += 1
        key = m.key()
        user = who[i]
        expected = TIERS[user % len(TIERS)] if user < rows else None
        if key != f"u{user}".encode() or value["tier"] != expected:
            wrong_profile += 1
        if m.partition() != kafka_partition(key, PARTITIONS):
            wrong_partition += 1
    missing = seen.count(0)
    twice = sum(1 for s in seen if s > 1)
    written = sum(seen) + extra
    unmatched = sum(1 for u in who if u >= rows)
    ok = not (missing or twice or extra or wrong_profile or wrong_partition)
    return (f"{'OK' if ok else 'WRONG'}: {written:,} records written for {len(who):,} clicks "
            f"({unmatched:,} of users without a profile); {missing:,} missing, {twice:,} "
            f"written more than once, {extra:,} unknown, {wrong_profile:,} with a wrong "
            f"profile, {wrong_partition:,} in another partition than their key's")


def report(name: str, n: int, table_rows: int, result: dict[str, Any]) -> None:
    elapsed = result["elapsed"]
    rate = n / elapsed
    batch_rate = n / result["batches_s"] if result["batches_s"] else 0.0
    metrics = result["metrics"]
    print(f"{name}: {n:,} clicks (+ {table_rows:,} table rows) in {elapsed:.1f} s = "
          f"{rate:,.0f} clicks/s ({(n + table_rows) / elapsed:,.0f} input records/s; "
          f"{batch_rate:,.0f} clicks/s within its micro-batches); {len(result['progress'])} "
          f"micro-batches; dropped {metrics['dropped-records-total']}; {result['steal']}, "
          f"{result['load']}")
    for p in result["progress"]:
        d = p["durationMs"]
        parts = ", ".join(f"{k} {v / 1000:.2f} s" for k, v in sorted(d.items())
                          if k != "triggerExecution" and v >= 10)
        print(f"  batch {p['batchId']}: {p['numInputRows']:,} input rows (a row per partition "
              f"range), {d.get('triggerExecution', 0) / 1000:.2f} s ({parts})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="stream records (clicks)")
    parser.add_argument("--table-rows", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=None,
                        help="users the clicks are drawn from (default: 1.1 x --table-rows)")
    parser.add_argument("--start", choices=["cold", "running", "both"], default="both")
    parser.add_argument("--warm-up", type=int, default=100_000,
                        help="running: clicks of the unmeasured warm-up run (with a tenth as "
                             "many profiles), on topics of their own")
    parser.add_argument("--per-trigger", type=int, default=None,
                        help="max clicks per micro-batch (default: all)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], help="extra kspark config k=v")
    parser.add_argument("--no-verify", action="store_true",
                        help="do not read the outputs back")
    parser.add_argument("--stages", action="store_true",
                        help="also print where each run's Spark time goes, stage by stage "
                             "(turns Spark's UI on for its REST API)")
    args = parser.parse_args()
    print(core_mode())
    users = args.users or args.table_rows * 11 // 10
    config = dict(kv.split("=", 1) for kv in args.conf)
    spark = local_spark(args.master, UI_CONF if args.stages else None)
    print(f"config: Spark session: {session_text(spark)}")
    print(f"config: kspark config {config or '(defaults)'}; topics of {PARTITIONS} partitions "
          f"on the embedded broker, read by kspark's own source (in the stages), output "
          f"written in one Kafka transaction per micro-batch and partition; max clicks per "
          f"micro-batch: {args.per_trigger or 'all'}")
    workdir = tempfile.mkdtemp(prefix="kspark-bench-st-join-")
    try:
        with EmbeddedBroker(log_path=os.path.join(workdir, "broker.log")) as broker:
            bootstrap = broker.bootstrap_servers
            prepare_coordinators(bootstrap)
            t0 = time.time()
            who = produce(bootstrap, "profiles", "clicks", args.table_rows, args.records, users,
                          seed=1)
            print(f"produced {args.table_rows:,} profiles and {args.records:,} clicks of "
                  f"{users:,} users in {time.time() - t0:.1f} s")
            starts = ["cold", "running"] if args.start == "both" else [args.start]
            for start in starts:
                if start == "running":
                    rows = max(1, args.table_rows // 10)
                    produce(bootstrap, "warm-up-profiles", "warm-up-clicks", rows, args.warm_up,
                            rows * 11 // 10, seed=7)
                    t0 = time.time()
                    run(spark, bootstrap, workdir, "bench-st-warm-up", "warm-up-profiles",
                        "warm-up-clicks", "warm-up-enriched", args.per_trigger, config)
                    print(f"warm-up: {args.warm_up:,} other clicks and {rows:,} profiles "
                          f"through the job in {time.time() - t0:.1f} s (not measured)")
                before = stage_ids(spark) if args.stages else -1
                output = f"enriched-{start}"
                result = run(spark, bootstrap, workdir, f"bench-st-{start}", "profiles", "clicks",
                             output, args.per_trigger, config)
                report(f"kspark, {'a cold start' if start == 'cold' else 'the job running'}",
                       args.records, args.table_rows, result)
                if args.stages:
                    print_stage_summary(spark, before, f"the {start} run")
                if not args.no_verify:
                    print(f"  output {output}: {verify(bootstrap, output, who, args.table_rows)}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
