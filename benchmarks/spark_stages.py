"""Where a Spark job's time goes, stage by stage, from Spark's own monitoring REST API.

A benchmark that wants it starts its session with :data:`UI_CONF` (kspark's local session keeps
the UI off) and calls :func:`print_stage_summary` at the end. Stages are grouped by their name
(``mapInArrow at ...``, ``start at ...``), so the stages of every micro-batch fall together;
each group prints its count, the median stage wall time (submission to completion) and, over
its tasks, the medians of Spark's task metrics: run time, CPU time, deserialization, result
serialization, scheduler delay, shuffle read and write, and the tasks per stage.
"""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections import defaultdict
from datetime import datetime
from typing import Any

#: Spark settings that make the REST API answer (on any free port)
UI_CONF = {"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.ui.retainedStages": "5000",
           "spark.ui.retainedTasks": "200000", "spark.ui.retainedJobs": "5000"}

_TIME = "%Y-%m-%dT%H:%M:%S.%f%Z"


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}/api/v1/{path}", timeout=30) as answer:
        return json.loads(answer.read())


def _ms(text: str) -> float:
    return datetime.strptime(text.replace("GMT", "UTC"), _TIME).timestamp() * 1000


def stage_ids(spark: Any) -> int:
    """The id of the last stage so far (-1: none): stages after it are a later run's."""
    base = spark.sparkContext.uiWebUrl
    if base is None:
        return -1
    stages = _get(base, f"applications/{spark.sparkContext.applicationId}/stages")
    return max((s["stageId"] for s in stages), default=-1)


def print_stage_summary(spark: Any, after: int = -1, label: str = "") -> None:
    """Print, per stage name, the medians of the completed stages with an id above ``after``."""
    base = spark.sparkContext.uiWebUrl
    if base is None:
        print("stage summary: Spark's UI is off (start the session with spark_stages.UI_CONF)")
        return
    app = f"applications/{spark.sparkContext.applicationId}"
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for stage in _get(base, f"{app}/stages?status=complete"):
        if stage["stageId"] > after:
            groups[stage["name"].split(" at ")[0]].append(stage)
    print(f"stages{' of ' + label if label else ''} (medians; ms):")
    print(f"  {'stage':<28} {'count':>5} {'wall':>7} {'tasks':>5} {'run':>7} {'cpu':>7} "
          f"{'deser':>6} {'res.ser':>7} {'sched':>6} {'shuf.r KB':>9} {'shuf.w KB':>9}")
    for name, stages in sorted(groups.items(), key=lambda g: g[1][0]["stageId"]):
        walls, tasks = [], []
        metrics: dict[str, list[float]] = defaultdict(list)
        for stage in stages:
            if "submissionTime" in stage and "completionTime" in stage:
                walls.append(_ms(stage["completionTime"]) - _ms(stage["submissionTime"]))
            tasks.append(stage["numCompleteTasks"])
            detail = _get(base, f"{app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList"
                                f"?length=10000")
            for task in detail:
                m = task.get("taskMetrics") or {}
                metrics["run"].append(m.get("executorRunTime", 0))
                metrics["cpu"].append(m.get("executorCpuTime", 0) / 1e6)
                metrics["deser"].append(m.get("executorDeserializeTime", 0))
                metrics["res"].append(m.get("resultSerializationTime", 0))
                metrics["sched"].append(task.get("schedulerDelay", 0))
                metrics["shr"].append(
                    (m.get("shuffleReadMetrics") or {}).get("remoteBytesRead", 0)
                    + (m.get("shuffleReadMetrics") or {}).get("localBytesRead", 0))
                metrics["shw"].append((m.get("shuffleWriteMetrics") or {}).get("bytesWritten", 0))

        def med(values: list[float]) -> float:
            return statistics.median(values) if values else 0.0

        print(f"  {name[:28]:<28} {len(stages):>5} {med(walls):>7.0f} {med(tasks):>5.0f} "
              f"{med(metrics['run']):>7.0f} {med(metrics['cpu']):>7.0f} "
              f"{med(metrics['deser']):>6.0f} {med(metrics['res']):>7.0f} "
              f"{med(metrics['sched']):>6.0f} {med(metrics['shr']) / 1024:>9.0f} "
              f"{med(metrics['shw']) / 1024:>9.0f}")
