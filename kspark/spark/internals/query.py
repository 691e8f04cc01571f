"""Interactive queries on Spark: read the committed state of a running or stopped application.

Each sub-topology runs as one ``transformWithStateInPandas`` operator; per task (partition) it
keeps the ValueState ``task`` (the pickled task checkpoint, with each store's metadata) and the
MapState ``buckets`` (``(store, bucket) -> pickled bucket``), or its buckets in ``task`` with its
checkpoint when they are small (:class:`~kspark.spark.internals.stage.SparkTaskState`). A query
reads both with Spark's state data source (``spark.read.format("statestore")``, option
``stateVarName``) at the latest committed batch, rebuilds each task's store from its buckets and
metadata, and merges the tasks in a read-only view (:mod:`kspark.state.views`).

``StreamsApp.start`` writes ``app.json`` into its checkpoint directory (see
:func:`app_info`), so that ``kspark store query --app-dir DIR`` can read the stores of an
application without its code.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
from typing import Any

from kspark.errors import InvalidStateStoreError, StreamsError
from kspark.spark.internals.stage import unpack_task_value
from kspark.state.builders import StoreBuilder
from kspark.state.internals.base import StoreBase
from kspark.state.views import ReadOnlyStoreView, read_only_view

APP_INFO = "app.json"
QUERY_DIR = "query"
#: the state format this version writes: 2, state keys are task grouping values (see "tasks");
#: 3, a task's buckets may be in its task value (``stage.pack_task_value``)
INFO_FORMAT = 3
#: the state formats this version reads (and resumes, writing format :data:`INFO_FORMAT`)
READABLE_FORMATS = (2, 3)


# -- app.json --------------------------------------------------------------------------------
def app_info(app: Any) -> dict[str, Any]:
    """What a query needs to know about ``app`` (a StreamsApp): its id, the state bucket count
    and, per store, its kind, builder parameters and the Spark state operator holding it."""
    from kspark.state.internals.changelog import changelog_topic

    topology = app.topology
    stages = app.plan.stages
    stores: dict[str, Any] = {}
    for index, sub in enumerate(stages):
        for name in sub.stores:
            builder = topology.store_builders[name]
            logged = builder.logging and name not in topology.source_stores
            stores[name] = {
                "kind": builder.kind,
                "params": builder.params,
                "sub_topology": sub.id,
                # Spark numbers stateful operators from the end of the plan: the last stage
                # of the chain is operator 0
                "operator_id": len(stages) - 1 - index,
                "changelog_topic": changelog_topic(app.application_id, name) if logged else None,
                "source_topic": topology.source_stores.get(name),
                # every task keeps a global store whole: a query reads one task's
                "global": name in topology.global_stores,
            }
    from kspark import __version__

    return {
        "format": INFO_FORMAT,
        "readable_formats": list(READABLE_FORMATS),
        "kspark_version": __version__,
        "application_id": app.application_id,
        # the topics whose partitions make the tasks
        "topics": sorted(t for t in app.topology.external_source_topics()
                         if t not in app.topology.global_topics()),
        "query_dir": QUERY_DIR,
        "state_buckets": app.config.state_buckets,
        "operators": len(stages),
        # the state key of a task is a grouping value v with v % tasks == the task's partition
        "tasks": app.task_count,
        # Spark partitions per stage (a restart keeps them; they only place the tasks)
        "spark_partitions": app.spark_partitions,
        "stores": stores,
    }


def _local(path: str) -> str | None:
    """``path`` as a local file system path, or ``None`` if it is a URI of another file system
    (``hdfs://``, ``s3a://``, ...)."""
    from urllib.parse import urlparse

    if "://" not in path and not path.startswith("file:"):
        return path
    parsed = urlparse(path)
    return parsed.path if parsed.scheme == "file" else None


def write_app_info(app: Any) -> str | None:
    """Write :func:`app_info` to ``<checkpoint_dir>/app.json``; return its path (``None`` for a
    checkpoint directory on another file system than the local one, which is skipped)."""
    local = _local(app.checkpoint_dir)
    if local is None:
        return None
    os.makedirs(local, exist_ok=True)
    path = os.path.join(local, APP_INFO)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(app_info(app), f, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def check_checkpoint(app: Any) -> None:
    """Refuse (:class:`~kspark.spark.internals.layout.CheckpointLayoutError`) to resume a
    checkpoint of ``app`` whose committed state has a layout ``app`` cannot read, naming the
    change; nothing to check for a checkpoint without a committed batch."""
    from kspark.spark.internals.layout import check_resumable

    local = _local(app.checkpoint_dir)
    if local is None or not os.path.isfile(os.path.join(local, APP_INFO)):
        return
    if latest_committed_batch(os.path.join(local, QUERY_DIR)) is None:
        return
    with open(os.path.join(local, APP_INFO), encoding="utf-8") as f:
        old = json.load(f)
    check_resumable(old, app_info(app), app.checkpoint_dir)


def load_app_info(app_dir: str) -> dict[str, Any]:
    """Read ``<app_dir>/app.json`` (``app_dir``: a StreamsApp's checkpoint directory)."""
    path = os.path.join(app_dir, APP_INFO)
    if not os.path.isfile(path):
        raise StreamsError(
            f"{app_dir!r} is not a kspark application directory: no {APP_INFO} (it is written "
            "into the checkpoint_dir of a StreamsApp when the app starts)"
        )
    with open(path, encoding="utf-8") as f:
        info = json.load(f)
    if info.get("format") not in READABLE_FORMATS:
        raise StreamsError(f"{path}: unsupported format {info.get('format')!r}")
    return info


def unknown_store(name: Any, info: dict[str, Any]) -> InvalidStateStoreError:
    known = ", ".join(sorted(info["stores"])) or "none"
    return InvalidStateStoreError(
        f"application {info['application_id']!r} has no store {name!r}; its stores: {known}"
    )


# -- reading state ---------------------------------------------------------------------------
def latest_committed_batch(query_dir: str, spark: Any = None) -> int | None:
    """The id of the last batch committed to the query's checkpoint (``None``: none yet). A
    checkpoint on another file system is listed through Spark's Hadoop file system."""
    local = _local(query_dir)
    if local is not None:
        commits = os.path.join(local, "commits")
        names = os.listdir(commits) if os.path.isdir(commits) else []
    else:
        if spark is None:
            raise StreamsError(f"listing {query_dir!r} needs a Spark session")
        jvm = spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(query_dir.rstrip("/") + "/commits")
        fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        names = [st.getPath().getName() for st in fs.listStatus(path)] if fs.exists(path) else []
    ids = [int(n) for n in names if n.isdigit()]
    return max(ids) if ids else None


class StateReader:
    """Reads the stores of one application from its checkpoint with Spark's state reader."""

    def __init__(self, spark: Any, app_dir: str, info: dict[str, Any]) -> None:
        self.spark = spark
        self.app_dir = app_dir
        self.info = info
        self.query_dir = app_dir.rstrip("/") + "/" + info.get("query_dir", QUERY_DIR)

    def _reader(self, operator: int, var: str, batch: int) -> Any:
        return (
            self.spark.read.format("statestore")
            .option("operatorId", operator)
            .option("stateVarName", var)
            .option("batchId", batch)
            .load(self.query_dir)
        )

    def task_rows(self, operator: int, batch: int) -> Any:
        """The ValueState ``task`` of an operator's tasks (Spark's ``statestore`` rows)."""
        return self._reader(operator, "task", batch)

    def task_values(self, operator: int, batch: int
                     ) -> dict[int, tuple[bytes, dict[tuple[str, int], bytes] | None]]:
        """Each task's state and the buckets its value holds (``None``: in the MapState), by
        partition."""
        rows = self.task_rows(operator, batch).select("key.task_group", "value.blob")
        return {self._task(g): unpack_task_value(bytes(blob)) for g, blob in rows.collect()}

    def task_metas(self, operator: int, batch: int) -> dict[int, dict[str, Any]]:
        """Each task's checkpoint (``Task.checkpoint_state``) by partition."""
        return {task: pickle.loads(meta)
                for task, (meta, _) in self.task_values(operator, batch).items()}

    def _task(self, group: int) -> int:
        """The task (partition) of a state key's grouping value."""
        return int(group) % int(self.info["tasks"])

    def buckets(self, operator: int, store: str, batch: int) -> dict[int, dict[int, bytes]]:
        """``partition -> bucket -> pickled bucket data`` of one store."""
        from pyspark.sql import functions as F

        out: dict[int, dict[int, bytes]] = {}
        for task, (_, inline) in self.task_values(operator, batch).items():
            for (name, bucket), blob in (inline or {}).items():
                if name == store:
                    out.setdefault(task, {})[bucket] = blob
        frame = self._reader(operator, "buckets", batch)
        rows = frame.where(F.col("user_map_key.store") == store).select(
            "key.task_group", "user_map_key.bucket", "user_map_value.blob"
        )
        for group, bucket, blob in rows.collect():
            out.setdefault(self._task(group), {})[int(bucket)] = bytes(blob)
        return out

    def _operator(self, name: str, batch: int) -> tuple[int, dict[int, dict[str, Any]]]:
        """The operator holding store ``name`` and its tasks' checkpoints."""
        expected = int(self.info["stores"][name]["operator_id"])
        candidates = [expected] + [
            op for op in range(int(self.info.get("operators", 0))) if op != expected
        ]
        first: dict[int, dict[str, Any]] = {}
        for op in candidates:
            metas = self.task_metas(op, batch)
            if op == expected:
                first = metas
            if any(name in m.get("stores", {}) for m in metas.values()):
                return op, metas
        return expected, first  # no task has run this store yet: empty

    def stores(self, name: str, batch: int | None = None) -> list[StoreBase]:
        """The store ``name`` of every task at ``batch`` (default: the latest committed), each
        rebuilt from its buckets and metadata and read-only."""
        if name not in self.info["stores"]:
            raise unknown_store(name, self.info)
        if batch is None:
            batch = latest_committed_batch(self.query_dir, self.spark)
        if batch is None:
            return []
        spec = self.info["stores"][name]
        operator, metas = self._operator(name, batch)
        blobs = self.buckets(operator, name, batch)
        builder = StoreBuilder(name, spec["kind"], spec["params"], logging=False)
        out = []
        partitions = sorted(set(metas) | set(blobs))
        if spec.get("global"):
            partitions = partitions[:1]
        for partition in partitions:
            store = builder.build(num_buckets=int(self.info["state_buckets"]))
            task = _NoTask(f"{spec['sub_topology']}_{partition}")
            store.init(task, _Buckets(blobs.get(partition, {})))
            meta = metas.get(partition, {}).get("stores", {}).get(name)
            if meta:
                store.restore_meta(meta)
            store.read_only = True
            out.append(store)
        return out


class _Buckets:
    """A bucket loader over one task's pickled buckets."""

    def __init__(self, blobs: dict[int, bytes]) -> None:
        self.blobs = blobs

    def load(self, store: str, bucket: int) -> Any | None:
        blob = self.blobs.get(bucket)
        return None if blob is None else pickle.loads(blob)


class _NoTask:
    """The store context of a query: no record, no changelog, nothing counted."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    def record_timestamp(self) -> int:
        return -1

    def record_dropped(self, reason: str, detail: str) -> None:
        pass

    def log_change(self, store: str, key: Any, value: Any, timestamp: int) -> None:
        pass

    def captures_changelog(self, store: str) -> bool:
        return False


class LatestStores:
    """The stores of every task as of the latest committed batch, reloaded when a newer batch
    has been committed (so a view of a running application stays current)."""

    def __init__(self, reader: StateReader, name: str) -> None:
        self.reader = reader
        self.name = name
        self._batch: int | None = None
        self._stores: list[StoreBase] = []
        self._lock = threading.Lock()

    def __call__(self) -> list[StoreBase]:
        with self._lock:
            batch = latest_committed_batch(self.reader.query_dir, self.reader.spark)
            if batch is not None and batch != self._batch:
                self._stores = self.reader.stores(self.name, batch)
                self._batch = batch
            return self._stores

    @property
    def batch_id(self) -> int | None:
        """The committed batch the view read last (``None``: nothing committed yet)."""
        return self._batch


def store_view(spark: Any, app_dir: str, name: str, info: dict[str, Any] | None = None
               ) -> ReadOnlyStoreView:
    """A read-only view of store ``name`` of the application checkpointed in ``app_dir``."""
    info = info if info is not None else load_app_info(app_dir)
    if name not in info["stores"]:
        raise unknown_store(name, info)
    reader = StateReader(spark, app_dir, info)
    return read_only_view(name, info["stores"][name]["kind"], LatestStores(reader, name))
