"""The processing order of a task's micro-batch (``kspark.runtime.partition_group``) against
Kafka Streams' way of choosing, written out one record at a time: each run (a topic's records
in offset order, a repartition topic's per upstream task) in its order, and across runs the
one whose next record has the smallest timestamp, the first run on a tie."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.runtime.partition_group import UPSTREAM_STRIDE, processing_order


def _one_at_a_time(topics, offsets, stamps, repartition, first):
    names = sorted(set(topics))
    runs = []
    for name in names:
        idx = sorted((i for i, t in enumerate(topics) if t == name), key=lambda i: offsets[i])
        if name in repartition:
            groups: dict[int, list[int]] = {}
            for i in idx:
                groups.setdefault(offsets[i] // UPSTREAM_STRIDE, []).append(i)
            runs.extend(groups[g] for g in sorted(groups))
        else:
            runs.append(idx)
    head = [i for run in runs for i in run if topics[i] in first]
    runs = [run for run in runs if topics[run[0]] not in first]
    heads = [(stamps[run[0]], r, 0) for r, run in enumerate(runs)]
    heapq.heapify(heads)
    out = []
    while heads:
        _, r, j = heapq.heappop(heads)
        out.append(runs[r][j])
        if j + 1 < len(runs[r]):
            heapq.heappush(heads, (stamps[runs[r][j + 1]], r, j + 1))
    return head + out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_order_is_the_one_record_at_a_time_choice(data):
    n = data.draw(st.integers(1, 60))
    topics = data.draw(st.lists(st.sampled_from(["a", "b", "r", "g"]), min_size=n, max_size=n))
    stamps = data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))  # many ties
    upstream = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    offsets = [u * UPSTREAM_STRIDE + i if t == "r" else i
               for i, (t, u) in enumerate(zip(topics, upstream, strict=True))]
    perm = data.draw(st.permutations(range(n)))  # the columns come in any order
    topics, stamps, offsets = ([col[i] for i in perm] for col in (topics, stamps, offsets))
    first = data.draw(st.sampled_from([(), ("g",)]))
    order, names = processing_order(np.array(topics, dtype=object), np.array(offsets),
                                    np.array(stamps), ("r",), first)
    got = list(range(n)) if order is None else order.tolist()
    assert got == _one_at_a_time(topics, offsets, stamps, {"r"}, set(first))
    assert sorted(names) == sorted(set(topics))
