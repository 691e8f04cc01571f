"""The local Spark session kspark starts: its JVM options and checkpoint file manager; its
Python workers import the installed pyspark with its bytecode cache, not the zipped copy Spark
puts first on their path."""

from __future__ import annotations

import os

import pyspark

from kspark.jvm.maven import cache_dir
from kspark.spark.internals.worker_daemon import GC_THRESHOLD


def test_spark_home_links_everything_but_the_zipped_python():
    from kspark.spark.session import spark_home_without_zipped_python

    home = spark_home_without_zipped_python()
    real = os.path.dirname(os.path.realpath(pyspark.__file__))
    assert home is not None, "pip-installed pyspark ships python/lib/pyspark.zip"
    assert os.path.exists(os.path.join(real, "python", "lib", "pyspark.zip"))
    assert not os.path.exists(os.path.join(home, "python"))
    assert os.path.realpath(os.path.join(home, "bin", "spark-submit")) == os.path.join(
        real, "bin", "spark-submit"
    )
    for entry in os.listdir(real):
        if entry != "python":
            assert os.path.realpath(os.path.join(home, entry)) == os.path.join(real, entry)
    # made once, then reused; an entry missing (from an older pyspark) is linked again
    os.unlink(os.path.join(home, "jars"))
    assert spark_home_without_zipped_python() == home
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.join(real, "jars")


def test_python_workers_import_the_installed_pyspark(spark):
    def where(batches):
        import pyarrow as pa
        import pyspark as worker_pyspark

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"file": [worker_pyspark.__file__]})

    files = {r.file for r in spark.range(2, numPartitions=2).mapInArrow(where, "file string")
             .collect()}
    assert files == {pyspark.__file__}, files
    # the driver's environment is left as it was
    assert os.environ.get("SPARK_HOME") != spark_home()


def test_python_workers_fork_from_kspark_daemon_with_its_modules_loaded(spark):
    def origin(batches):
        import gc
        import os
        import sys

        import pyarrow as pa

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        import pyspark.worker

        loaded = "kspark.spark.internals.stage_rows" in sys.modules
        gc_threshold = list(gc.get_threshold())
        task = pyspark.worker.main.__qualname__
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"parent": [parent], "loaded": [loaded],
                                              "gc": [gc_threshold], "task": [task]})

    rows = spark.range(2, numPartitions=2).mapInArrow(
        origin, "parent string, loaded boolean, gc array<bigint>, task string")
    for row in rows.collect():
        assert "kspark.spark.internals.worker_daemon" in row.parent, row.parent
        assert row.loaded  # imported by the daemon, not by this function
        assert tuple(row.gc) == GC_THRESHOLD  # set by the daemon before it forked
        assert row.task.startswith("_releasing"), row.task  # each task then frees its memory


#: a task's heap left fragmented: 2 KiB objects (from the C heap, not Python's arenas) of which
#: every 64th outlives the task; its last output, written to a pipe and not flushed, must have
#: reached the pipe's other end when the release starts
_FRAGMENTED_TASK = """
import os
import select
import pyarrow  # imported by the daemon before it forks
from kspark.spark.internals import worker_daemon

kept = []

def rss():
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) << 10

def task(infile, outfile):
    objects = [os.urandom(2048) for _ in range(150_000)]
    kept.extend(objects[::64])
    print(rss())
    outfile.write(b"end of stream")
    return len(kept)

release = worker_daemon.release_memory

def flushed_first():
    assert select.select([read_end], [], [], 0)[0], "the task's output waits for the release"
    assert os.read(read_end, 64) == b"end of stream"
    release()

worker_daemon.release_memory = flushed_first
read_end, write_end = os.pipe()
with os.fdopen(write_end, "wb", 65536) as outfile:
    assert worker_daemon._releasing(task)(None, outfile) == len(kept)
print(rss())
"""


def test_a_worker_gives_back_the_memory_its_task_freed():
    import subprocess
    import sys

    during, after = map(int, subprocess.run(
        [sys.executable, "-c", _FRAGMENTED_TASK], check=True, capture_output=True, text=True,
    ).stdout.split())
    assert during - after > 200 * 2**20, (during >> 20, after >> 20)


def spark_home() -> str | None:
    from kspark.spark.session import spark_home_without_zipped_python

    return spark_home_without_zipped_python()


def test_the_local_session_jvm_runs_with_kspark_jvm_options(spark):
    """The JIT setting of ``kspark.spark.session.JVM_OPTIONS`` reaches the driver JVM (set as
    Spark's default Java options, so that a user's ``extraJavaOptions`` come after it)."""
    from kspark.spark.session import JVM_OPTIONS

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    for option in JVM_OPTIONS.split():
        assert option in arguments, arguments
    conf = spark.sparkContext.getConf()
    driver = conf.get("spark.driver.defaultJavaOptions")
    assert driver.startswith(JVM_OPTIONS)
    assert conf.get("spark.executor.defaultJavaOptions") == JVM_OPTIONS
    # and its class archive (kspark.jvm.class_archive): mapped, or written when the JVM exits
    archive = [a for a in arguments
               if a.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="))]
    assert len(archive) == 1 and archive[0] in driver.split(), (driver, arguments)
    path = archive[0].split("=", 1)[1]
    assert os.path.dirname(path) == str(cache_dir() / "jvm")
    if "-XX:SharedArchiveFile=" in archive[0]:
        pid = jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/maps") as f:
            assert path in f.read()  # Java took it (it ignores one it cannot use)


def test_the_local_session_writes_checkpoints_through_the_file_system_api(spark):
    """The checkpoint file manager kspark's local session names is set, and is a class of this
    Spark (a renamed class would fail every streaming query)."""
    from kspark.spark.session import CHECKPOINT_FILE_MANAGER

    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == (
        CHECKPOINT_FILE_MANAGER)
    jvm = spark.sparkContext._jvm
    manager = jvm.java.lang.Class.forName(CHECKPOINT_FILE_MANAGER)
    interface = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager")
    assert interface.isAssignableFrom(manager)


def test_an_apps_start_starts_the_python_workers_in_a_job_of_its_own_once(spark, app_dir):
    """``StreamsApp.start`` first runs a job that starts a Python worker on every task slot,
    with the stages' code imported (while the driver plans the query), once per SparkContext."""
    import threading

    from spark_harness import run_spark

    from kspark import Topology, serdes
    from kspark.spark.internals import warm_up

    topology = Topology()
    topology.add_source("in", "in", serdes.String(), serdes.String())
    topology.add_sink("out", "out", "in", key_serde=serdes.String(), value_serde=serdes.String())
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    before = set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP))
    warm_up._started.discard(sc.applicationId)  # as for a new context
    pair = (serdes.String(), serdes.String())
    outputs, _ = run_spark(spark, topology, {"in": [("k", "v", 1)]}, {"out": pair},
                           {"in": pair}, app_dir, batches=1, app_id="warm-up")
    assert outputs["out"] == [("k", "v", 1)]
    for thread in threading.enumerate():
        if thread.name == warm_up.JOB_GROUP:
            thread.join(120)
    jobs = set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP)) - before
    assert len(jobs) == 1
    info = tracker.getJobInfo(jobs.pop())
    assert info is not None and info.status == "SUCCEEDED"
    stages = [tracker.getStageInfo(s) for s in info.stageIds]
    assert [s.numTasks for s in stages if s is not None] == [sc.defaultParallelism]
    assert warm_up.start_python_workers(spark) is None  # once per context
