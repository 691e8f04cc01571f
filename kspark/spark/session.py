"""The local Spark session kspark starts by default (``spark=None``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
import weakref
from typing import Any

_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: The JIT's client compiler only (the user's options win): docs/performance.md#client-compiler-only
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

#: Checkpoint files through Hadoop's FileSystem API: docs/performance.md#checkpoint-file-manager
#: What differs: a log file that must not be overwritten is checked for before the rename
#: rather than refused by the rename itself. So two processes running one application on one
#: checkpoint directory at the same moment may both log a batch instead of the second failing
#: (within one Spark session Spark refuses a second active query on a checkpoint either way).
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


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


def spark_home_without_zipped_python() -> str | None:
    """A Spark home whose Python workers import pyspark with its bytecode cache, or None.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on every Python
    worker's path. Python compiles modules imported from a zip on every start (a zip has no
    bytecode cache; the cost: docs/performance.md#zipped-pyspark). The returned directory links
    everything of the pip-installed Spark home except ``python/``, so workers import the
    installed pyspark package (the same one this driver runs) from its compiled files instead.
    None when there is nothing to gain: no zip, or pyspark not installed as a package next to
    its zip.
    """
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    real = os.path.realpath(os.environ.get("SPARK_HOME") or _find_spark_home())
    package = os.path.realpath(os.path.dirname(pyspark.__file__))
    zipped = os.path.join(real, "python", "lib", "pyspark.zip")
    if os.name != "posix" or real != package or not os.path.exists(zipped):
        return None
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    home = os.path.join(tempfile.gettempdir(), f"kspark-spark-home-{os.getuid()}-{digest}")
    if not os.path.isdir(home):
        staging = tempfile.mkdtemp(prefix="kspark-spark-home-", dir=tempfile.gettempdir())
        _link_entries(real, staging)
        try:
            os.rename(staging, home)
        except OSError:  # another process made it first
            for entry in os.listdir(staging):
                os.unlink(os.path.join(staging, entry))
            os.rmdir(staging)
    _link_entries(real, home)  # what a newer pyspark added since
    return home


def _link_entries(real: str, home: str) -> None:
    """Link each entry of the Spark home ``real`` but ``python/`` into ``home``, once. (Spark
    may add entries of its own there, e.g. the ``work`` directory of local-cluster executors.)"""
    for entry in os.listdir(real):
        target = os.path.join(home, entry)
        if entry != "python" and not os.path.lexists(target):
            with contextlib.suppress(FileExistsError):  # another process linked it
                os.symlink(os.path.join(real, entry), target)


#: Python workers forked from a daemon that imported kspark's stage modules first
WORKER_DAEMON = "kspark.spark.internals.worker_daemon"


#: how often executors snapshot state and delete versions Spark no longer retains
MAINTENANCE_INTERVAL = "10s"
#: the batches whose state, offsets and commits a checkpoint keeps (Spark's default: 100); a
#: restart needs the last, a store query reads the last committed
MIN_BATCHES_TO_RETAIN = "20"


def kspark_spark_conf(shuffle_partitions: int = 4) -> dict[str, str]:
    """Settings of kspark's local session: RocksDB state with changelog checkpointing, quiet
    console, checkpoint files written as :data:`CHECKPOINT_FILE_MANAGER` does, the JVM options
    of :data:`JVM_OPTIONS`, Python workers forked from :data:`WORKER_DAEMON`."""
    return {
        "spark.sql.streaming.stateStore.providerClass": _ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # old state versions are deleted by this background task (Spark's default: once a
        # minute, the first a minute after an executor starts, so a process that restarts more
        # often never cleans up): see docs/performance.md#soak
        "spark.sql.streaming.stateStore.maintenanceInterval": MAINTENANCE_INTERVAL,
        "spark.sql.streaming.minBatchesToRetain": MIN_BATCHES_TO_RETAIN,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.driver.memory": "2g",
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        "spark.driver.defaultJavaOptions": JVM_OPTIONS,
        "spark.executor.defaultJavaOptions": JVM_OPTIONS,
        "spark.python.daemon.module": WORKER_DAEMON,
    }


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (not a classic ``SparkSession``, which
    has a SparkContext and a JVM in this process)."""
    from pyspark.sql import SparkSession

    return not isinstance(spark, SparkSession)


#: the settings of :func:`kspark_spark_conf` a session may take at run time (SQL settings):
#: a session given to an app gets them from it; the rest belong to the JVM's or server's start
SESSION_SETTINGS = (
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
    "spark.sql.streaming.stateStore.maintenanceInterval",
    "spark.sql.streaming.minBatchesToRetain",
    "spark.sql.session.timeZone",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.streaming.noDataMicroBatches.enabled",
    "spark.sql.streaming.checkpointFileManagerClass",
)


def configure_session(spark: Any) -> None:
    """Give a session an app was given (classic, e.g. ``spark-submit``'s, or Spark Connect)
    kspark's SQL settings (:data:`SESSION_SETTINGS`): a stateful query needs RocksDB state,
    the typed results UTC."""
    conf = kspark_spark_conf()
    for key in SESSION_SETTINGS:
        if spark.conf.get(key, None) != conf[key]:
            spark.conf.set(key, conf[key])


def local_spark(master: str = "local[2]", conf: dict[str, Any] | None = None) -> Any:
    """Get or create a Spark session for kspark on ``master``."""
    prepare_python_env()
    from pyspark.sql import SparkSession

    from kspark.spark.internals import fork_server
    from kspark.spark.internals.jvm_stderr import launch_gateway_quietly
    from kspark.spark.internals.kafka_connector import add_connector_jars

    builder = SparkSession.builder.master(master).appName("kspark")
    settings = {**kspark_spark_conf(), **(conf or {})}
    # a local master's driver-side Python processes forked (the launcher is this machine's)
    if master.startswith("local") and settings["spark.pyspark.python"] == sys.executable:
        launcher = fork_server.start()
        if launcher is not None:
            settings["spark.pyspark.python"] = launcher
            if os.environ.get("PYSPARK_PYTHON") == sys.executable:
                os.environ["PYSPARK_PYTHON"] = launcher
    add_connector_jars(settings)  # Spark's Kafka connector, when it can be had
    # the JVM (and every Python worker it starts) takes SPARK_HOME from the environment at launch
    previous = os.environ.get("SPARK_HOME")
    home = spark_home_without_zipped_python()
    if settings["spark.driver.defaultJavaOptions"] == JVM_OPTIONS:  # not the user's own
        settings["spark.driver.defaultJavaOptions"] = " ".join(
            [JVM_OPTIONS, *(f'"{o}"' if " " in o else o for o in driver_class_archive(home))])
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    if home is not None:
        os.environ["SPARK_HOME"] = home
    try:
        launch_gateway_quietly({"spark.master": master, "spark.app.name": "kspark", **{
            k: str(v) for k, v in settings.items()}})
        spark = builder.getOrCreate()
    finally:
        if home is not None:
            if previous is None:
                os.environ.pop("SPARK_HOME", None)
            else:
                os.environ["SPARK_HOME"] = previous
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    return spark


def driver_class_archive(home: str | None) -> list[str]:
    """The driver JVM's class archive options (:mod:`kspark.jvm.class_archive`) for the Spark
    home ``home`` (None: pyspark's own)."""
    from pyspark.find_spark_home import _find_spark_home

    from kspark.jvm.class_archive import archive_options
    from kspark.jvm.maven import ResolutionError, java

    try:
        command = java()
    except ResolutionError:
        return []
    jars = os.path.join(home or _find_spark_home(), "jars")
    return archive_options("spark", command, [jars], [JVM_OPTIONS])


#: the Spark sessions kspark's data sources are registered with
_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()


def register_data_sources(spark: Any) -> None:
    """Register kspark's data sources with ``spark`` (once per session)."""
    if spark in _REGISTERED:
        return
    from kspark.spark.internals.file_source import FileRangeSource, FileSource
    from kspark.spark.internals.kafka_ranges import KafkaRangeSource
    from kspark.spark.internals.kafka_source import KafkaSource
    from kspark.spark.internals.tick_source import TickSource

    spark.dataSource.register(FileSource)
    spark.dataSource.register(FileRangeSource)
    spark.dataSource.register(TickSource)
    spark.dataSource.register(KafkaSource)
    spark.dataSource.register(KafkaRangeSource)
    _REGISTERED.add(spark)
