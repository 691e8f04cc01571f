"""Spark creates and plans kspark's Python sources in Python processes of its own, which stay
for the app's life: creating the Kafka and tick sources and asking for their schema must not
load Arrow, numpy or pandas there (docs/performance.md, "The data source planner's imports")."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pyarrow", "numpy", "pandas")

PLAN = f"""
import json, sys
from kspark.spark.internals.kafka_ranges import KafkaRangeSource
from kspark.spark.internals.kafka_source import KafkaSource
from kspark.spark.internals.row_schema import ROW_DDL
from kspark.spark.internals.tick_source import TickSource
options = json.loads(sys.argv[1])
sources = [KafkaSource(options), KafkaRangeSource(options),
           TickSource({{"interval_ms": "100", "tasks": "0,1"}})]
for source in sources[::2]:
    source.streamReader(source.schema())
sources[1].simpleStreamReader(sources[1].schema())
print(json.dumps({{"rows": all(source.schema() == ROW_DDL for source in sources),
                  "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def test_creating_the_sources_and_their_schema_loads_no_arrow_numpy_or_pandas():
    from kspark.io import kafka
    from kspark.spark.internals.kafka_source import IN_STAGE_OPTION, TOPIC_OPTION

    # the options the app gives the sources (kspark.spark.internals.kafka_input)
    options = {**kafka("localhost:9", topic="clicks").source_options("clicks"),
               IN_STAGE_OPTION: "true", TOPIC_OPTION: "clicks"}
    run = subprocess.run([sys.executable, "-c", PLAN, json.dumps(options)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found == {"rows": True, "loaded": []}


def test_the_row_schema_is_the_wire_formats_arrow_schema():
    from kspark.spark.internals.row_schema import ROW_COLUMNS, ROW_DDL
    from kspark.spark.internals.wire import ROW_ARROW

    assert ROW_ARROW.names == ROW_COLUMNS
    assert ROW_DDL.split(", ")[0] == "kind string" and len(ROW_DDL.split(", ")) == len(ROW_ARROW)
