"""The local Spark session kspark starts by default (``spark=None``)."""

from __future__ import annotations

import os
import sys
from typing import Any

_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def prepare_python_env() -> None:
    """Python workers (and the streaming data source runner) start ``python3`` from PATH unless
    told otherwise; point them at this interpreter and its import path."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    cwd = os.getcwd()
    if cwd not in paths:
        paths.insert(0, cwd)
    existing = os.environ.get("PYTHONPATH", "")
    merged = os.pathsep.join(dict.fromkeys([*paths, *existing.split(os.pathsep)]).keys())
    os.environ["PYTHONPATH"] = merged.strip(os.pathsep)


def kspark_spark_conf(shuffle_partitions: int = 4) -> dict[str, str]:
    """Settings kspark needs: RocksDB state with changelog checkpointing, quiet console."""
    return {
        "spark.sql.streaming.stateStore.providerClass": _ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.driver.memory": "2g",
    }


def local_spark(master: str = "local[2]", conf: dict[str, Any] | None = None) -> Any:
    """Get or create a Spark session for kspark on ``master``."""
    prepare_python_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("kspark")
    for key, value in {**kspark_spark_conf(), **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    return spark


def register_data_sources(spark: Any) -> None:
    from kspark.spark.kafka_source import KafkaSource
    from kspark.spark.sources import FileSource, TickSource

    spark.dataSource.register(FileSource)
    spark.dataSource.register(TickSource)
    spark.dataSource.register(KafkaSource)
