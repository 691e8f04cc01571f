"""The on_window_close aggregation's pending sessions against a sorted-set model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.dsl.internals.windowing.pending_closes import PendingCloses

ENTRY = st.tuples(st.integers(0, 20), st.integers(0, 20), st.sampled_from("abc"))
OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "discard", "take"]), ENTRY), max_size=80)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(initial=st.lists(ENTRY, max_size=10), ops=OPS)
def test_pending_closes_take_in_order_each_live_entry_once(initial, ops) -> None:
    pending, model = PendingCloses(initial), set(initial)
    for op, entry in ops:
        if op == "add":
            pending.add(entry)
            model.add(entry)
        elif op == "discard":
            pending.discard(entry)
            model.discard(entry)
        else:
            close = entry[0]
            due = sorted(e for e in model if e[0] < close)
            assert pending.take_ending_before(close) == due
            model -= set(due)
        assert len(pending) == len(model)
