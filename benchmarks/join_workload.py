"""The ad-impressions workload of the join benchmarks (``driver_stream_join.py``,
``spark_join_vs_native.py``): impressions and clicks of the same users, to be joined within a
time difference.

Records alternate at random between the two topics (``impressions`` and ``clicks``, about half
each), each of a user drawn uniformly from ``users`` (String keys ``u<n>``), with a small JSON
value: an impression ``{"id": i, "ad": "ad-<n>", "slot": s}``, a click ``{"id": i, "ad":
"ad-<n>", "x": x, "y": y}``; ``id`` is the record's position in the whole input, so every
record is unique and a join result names its pair. Timestamps advance by ``1000 / rate`` ms a
record (``rate`` records per second of event time, 1 000 by default) and arrive in that order,
except that ``late_share`` of the records (5 %) are held back by up to ``max_delay_ms`` (500 ms):
they arrive after records up to that much newer, so no record is ever more than
``max_delay_ms`` behind the newest one before it. With 10 k users and the defaults, a user
has a record on each topic every 20 s on average: about one partner within a window of
+-10 s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

IMPRESSIONS = "impressions"
CLICKS = "clicks"
TOPICS = (IMPRESSIONS, CLICKS)
#: the join window of both benchmarks: +-10 s; grace 1 s (more than the workload's disorder)
DIFF_MS = 10_000
GRACE_MS = 1_000
BASE_TS = 1_700_000_000_000


def make_frame(n: int, users: int, seed: int = 1, rate: float = 1_000.0,
               late_share: float = 0.05, max_delay_ms: int = 500) -> pd.DataFrame:
    """The workload in arrival order: columns ``topic`` (str), ``key`` (str), ``ts`` (int64 ms),
    ``id`` (int64, unique), ``ad`` (str), ``n`` (int64: an impression's slot, a click's x),
    ``m`` (int64: a click's y, 0 for an impression)."""
    rng = np.random.default_rng(seed)
    true_ts = BASE_TS + (np.arange(n) * (1000.0 / rate)).astype(np.int64)
    delay = np.where(rng.random(n) < late_share, rng.integers(1, max_delay_ms + 1, n), 0)
    order = np.argsort(true_ts + delay, kind="stable")
    is_click = rng.random(n) < 0.5
    user = rng.integers(0, users, n)
    frame = pd.DataFrame({
        "topic": np.where(is_click, CLICKS, IMPRESSIONS)[order],
        "key": np.char.add("u", user.astype(str))[order],
        "ts": true_ts[order],
        "id": np.arange(n, dtype=np.int64),
        "ad": np.char.add("ad-", rng.integers(0, 500, n).astype(str)),
        "n": rng.integers(0, 1000, n),
        "m": np.where(is_click[order], rng.integers(0, 1000, n), 0),
    })
    return frame


def value_of(topic: str, id_: int, ad: str, n: int, m: int) -> dict:
    """The JSON value of a record."""
    if topic == IMPRESSIONS:
        return {"id": id_, "ad": ad, "slot": n}
    return {"id": id_, "ad": ad, "x": n, "y": m}


def records(frame: pd.DataFrame) -> tuple[tuple[str, str, dict, int], ...]:
    """``(topic, key, value, timestamp)`` in arrival order, in a tuple (the garbage collector
    stops tracking it, so the benchmark's own input adds nothing to its collections)."""
    return tuple(
        (t, k, value_of(t, i, a, n, m), ts)
        for t, k, ts, i, a, n, m in zip(
            frame["topic"].tolist(), frame["key"].tolist(), frame["ts"].tolist(),
            frame["id"].tolist(), frame["ad"].tolist(), frame["n"].tolist(),
            frame["m"].tolist()))


def joiner(impression: dict | None, click: dict | None) -> dict:
    """The joiner of both benchmarks: the ids of the pair (``None`` for a missing side) and the
    impression's ad."""
    return {"imp": None if impression is None else impression["id"],
            "click": None if click is None else click["id"],
            "ad": None if impression is None else impression["ad"]}


def reference_pairs(frame: pd.DataFrame, diff_ms: int = DIFF_MS) -> pd.DataFrame:
    """Every ``(id_imp, id_click)`` of the same key whose timestamps differ by at most
    ``diff_ms``: what an inner join that misses nothing emits (found by a binary search of each
    impression's range in the clicks sorted by key and timestamp)."""
    codes, _ = pd.factorize(frame["key"])
    stride = np.int64(1) << 40  # more than any span of the workload's timestamps
    comp = codes.astype(np.int64) * stride + (frame["ts"].to_numpy() - BASE_TS)
    is_imp = (frame["topic"] == IMPRESSIONS).to_numpy()
    ids = frame["id"].to_numpy()
    clicks = np.argsort(comp[~is_imp], kind="stable")
    click_comp, click_ids = comp[~is_imp][clicks], ids[~is_imp][clicks]
    imp_comp, imp_ids = comp[is_imp], ids[is_imp]
    lo = np.searchsorted(click_comp, imp_comp - diff_ms, "left")
    hi = np.searchsorted(click_comp, imp_comp + diff_ms, "right")
    counts = hi - lo
    starts = np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
    return pd.DataFrame({"id_imp": np.repeat(imp_ids, counts),
                         "id_click": click_ids[np.arange(counts.sum()) + starts]})
