"""``benchmarks/steady_clicks.latencies``: each click's latency to the first output record
covering it (by arrival), the clicks no record covers, for sessions (timestamps) and running
counts (ordinals) alike."""

from __future__ import annotations

import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
sys.path.append(BENCHMARKS)

from steady_clicks import latencies  # noqa: E402


def test_the_first_record_covering_a_click_answers_it_later_ones_do_not():
    # clicks of one user at positions 1, 2, 3, 10, 11, produced at 100, 200, 300, 1000, 1100
    clicks = {"u": ([1, 2, 3, 10, 11], [100, 200, 300, 1000, 1100])}
    received = {"u": [(1, 1, 150), (1, 2, 260), (10, 10, 1500), (1, 3, 2000), (1, 3, 9000)],
                "other": [(1, 11, 50)]}  # another user's records answer none of u's
    delays, missing = latencies(clicks, received)
    assert delays == [50, 60, 500, 1700]
    assert missing == 1  # position 11: no record reaches it


def test_a_record_covering_many_clicks_answers_each_not_yet_answered():
    clicks = {"u": (list(range(1, 7)), [10, 20, 30, 40, 50, 60]),
              "v": ([5], [5])}
    received = {"u": [(3, 4, 100), (1, 6, 200)], "v": [(6, 9, 300)]}
    delays, missing = latencies(clicks, received)
    assert sorted(delays) == [60, 70, 140, 150, 180, 190]
    assert missing == 1  # v's click at 5 is before its only record's first position
