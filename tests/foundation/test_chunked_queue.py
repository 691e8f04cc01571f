"""The test driver's kept records (``kspark.testing.internals.chunked_queue``): a first-in
first-out queue of rows, kept as columns, that adds no object for the garbage collector to
track per row and whose chunks it stops visiting."""

from __future__ import annotations

import gc
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import Materialized, StreamsBuilder, serdes
from kspark.testing import TopologyTestDriver
from kspark.testing.internals.chunked_queue import CHUNK, ChunkedQueue

# an operation: ("append", 1), ("extend", n) or ("columns", n) of n new rows, ("pop", k) k
# times, ("take", 0)
_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.just(1)),
    st.tuples(st.just("extend"), st.integers(0, 3 * CHUNK)),
    st.tuples(st.just("columns"), st.integers(0, 3 * CHUNK)),
    st.tuples(st.just("pop"), st.integers(1, 2 * CHUNK)),
    st.tuples(st.just("take"), st.just(0)),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_the_queue_gives_what_a_deque_gives(ops: list[tuple[str, int]]) -> None:
    queue = ChunkedQueue(3)
    model: deque[tuple[int, bytes, None]] = deque()
    counter = 0
    for op, n in ops:
        if op in ("append", "extend", "columns"):
            new = [(i, b"v%d" % i, None) for i in range(counter, counter + n)]
            counter += n
            if op == "append":
                queue.append(new[0])
            elif op == "extend":
                queue.extend(iter(new))
            else:
                queue.extend_columns(list(zip(*new)) or [[], [], []])
            model.extend(new)
        elif op == "pop":
            for _ in range(n):
                if not model:
                    with pytest.raises(IndexError):
                        queue.popleft()
                    break
                assert queue.popleft() == model.popleft()
        else:
            assert queue.take_all() == list(model)
            model.clear()
        assert len(queue) == len(model)
        assert bool(queue) == bool(model)
    assert queue.take_all() == list(model)
    assert not queue


def test_rows_add_no_tracked_object_and_full_chunks_are_not_tracked() -> None:
    queue = ChunkedQueue(2)
    n = 10 * CHUNK + 5
    gc.collect()
    gc.disable()
    try:
        made = gc.get_count()[0]  # tracked objects made since the last collection, less freed
        queue.extend((b"k%d" % i, i) for i in range(n))
        # each row's tuple is freed once its fields are in the columns: nothing per row stays
        # for the collector to count (kept, they would make it run every 700 rows)
        assert gc.get_count()[0] - made < 50
    finally:
        gc.enable()
    for _ in range(2):  # a tuple is let go once its items are; one pass may see it first
        gc.collect()
    # ten chunks, none of them tracked: a full collection visits the deque's ten items only
    held = gc.get_referents(queue._chunks)
    assert len(held) == 10
    assert not any(gc.is_tracked(chunk) for chunk in held)
    assert queue.popleft() == (b"k0", 0)
    assert len(queue) == n - 1


def test_rows_of_another_width_are_refused() -> None:
    queue = ChunkedQueue(3)
    with pytest.raises(ValueError, match="3 fields, not 2"):
        queue.append((1, 2))
    with pytest.raises(ValueError, match="different lengths"):
        queue.extend_columns([[1], [2, 3], [4]])
    assert not queue


def test_the_driver_keeps_output_and_changelog_in_order_across_chunks() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("input", serdes.String(), serdes.Long())
    stream.to("output", serdes.String(), serdes.Long())
    stream.group_by_key().count(Materialized("counts").with_caching_disabled())
    n = 3 * CHUNK + 7
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("input", serdes.String(), serdes.Long())
        for i in range(n):
            pipe.pipe_input(f"k{i % 100}", i, i)
        out = driver.create_output_topic("output", serdes.String(), serdes.Long())
        assert out.get_queue_size() == n
        assert out.read_value() == 0
        assert out.get_queue_size() == n - 1
        rest = out.read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in rest] == [
            (f"k{i % 100}", i, i) for i in range(1, n)]
        assert out.is_empty()
        assert driver.changelogs["counts"] == [
            (f"k{i % 100}", i // 100 + 1, i) for i in range(n)]
        pipe.pipe_input("k0", 0, n)  # taken after the first read: appended in order
        assert driver.changelogs["counts"][-1] == ("k0", n // 100 + 2, n)
        assert len(driver.changelogs["counts"]) == n + 1
