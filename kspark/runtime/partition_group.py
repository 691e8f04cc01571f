"""The order in which a task processes one micro-batch of its input, as Kafka Streams' partition
group chooses: each topic-partition's records in offset order, and across them the one whose
next record has the smallest timestamp first.

A repartition topic's records come from several upstream tasks, each in an offset range of its
own (``upstream * UPSTREAM_STRIDE + seq``) and written side by side within the micro-batch; each
upstream task's records are merged by timestamp like a partition of their own, as they would
interleave on a Kafka partition, rather than one upstream task after another.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

#: repartitioned records get offsets ``upstream_partition * UPSTREAM_STRIDE + seq``
UPSTREAM_STRIDE = 1 << 40


def processing_order(
    topics: np.ndarray, offsets: np.ndarray, stamps: np.ndarray,
    repartition_topics: Collection[str] = (), first_topics: Collection[str] = (),
) -> tuple[np.ndarray | None, list[str]]:
    """The positions of the records in processing order (``None``: already in order) and the
    distinct topics among them. ``topics``, ``offsets`` and ``stamps`` are the records' columns
    (one task's records, in any order). The records of ``first_topics`` (global stores'
    topics, which update the stores every task reads) come before all others, in offset
    order."""
    names = [str(n) for n in pd.unique(topics)]
    split = [n for n in names if n in repartition_topics]
    if len(names) <= 1 and not split:
        return (None if _ascending(offsets) else np.argsort(offsets, kind="stable")), names
    ahead = [n for n in sorted(names) if n in first_topics]
    if ahead:
        head = [np.flatnonzero(topics == n) for n in ahead]
        head = [idx[np.argsort(offsets[idx], kind="stable")] for idx in head]
        rest = np.flatnonzero(~np.isin(topics, ahead))
        order, _ = processing_order(topics[rest], offsets[rest], stamps[rest],
                                    repartition_topics)
        tail = rest if order is None else rest[order]
        return np.concatenate([*head, tail]).astype(np.int64), names
    runs = []
    for name in sorted(names):
        idx = np.flatnonzero(topics == name)
        idx = idx[np.argsort(offsets[idx], kind="stable")]
        if name in split:
            upstream = offsets[idx] // UPSTREAM_STRIDE
            cuts = np.flatnonzero(upstream[1:] != upstream[:-1]) + 1
            runs.extend(np.split(idx, cuts))
        else:
            runs.append(idx)
    if len(runs) == 1:
        return (None if _ascending(runs[0]) else runs[0]), names
    # Taking the run whose head has the smallest timestamp (the first run on a tie), one record
    # at a time, gives the records in the order of their run's largest timestamp so far, then
    # of their run, then of their place in it: a stable sort on those keys does it at once.
    order = np.concatenate(runs)
    seen_max = np.concatenate([np.maximum.accumulate(stamps[run]) for run in runs])
    run_ids = np.repeat(np.arange(len(runs)), [len(run) for run in runs])
    return order[np.lexsort((run_ids, seen_max))].astype(np.int64), names


def _ascending(values: np.ndarray) -> bool:
    return len(values) < 2 or bool((values[1:] >= values[:-1]).all())
