"""The clickstream workload of the session benchmarks (2 M events and 10 k users is the
reference size), written once to Parquet and reused.

Every user has the same number of events. A user's first event falls somewhere in the first
hour; after that, nine delays in ten are a pause inside a session (0 to 8 s) and one in ten
starts a new session (60 to 600 s later). Events arrive in event-time order except that 5 % of
them are held back by up to 8 s, so they arrive out of order. Sessions close after 10 s of
inactivity with 10 s of grace in every engine compared. Columns: ``key`` (str, ``u<n>``),
``ts`` (int64 ms), ``value`` (int64, always 1), ``seq`` (int64, the arrival order).

    .venv/bin/python benchmarks/clickstream.py 2000000 10000
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import pandas as pd

GAP_MS = 10_000
GRACE_MS = 10_000
#: where workloads and the benchmarks' scratch files go
BENCH = os.path.join(tempfile.gettempdir(), "kspark-bench")


def make(n: int, k: int, seed: int = 1) -> str:
    """The path of the workload of ``n`` events by ``k`` users (written on first use)."""
    path = os.path.join(BENCH, f"click_{n}_{k}.parquet")
    if os.path.exists(path):
        return path
    os.makedirs(BENCH, exist_ok=True)
    rng = np.random.default_rng(seed)
    per_user = n // k
    users = np.repeat(np.arange(k), per_user)
    size = users.size
    new_session = rng.random(size) < 0.1
    delays = np.where(new_session, rng.integers(60_000, 600_000, size),
                      rng.integers(0, 8_000, size))
    firsts = np.r_[0, np.flatnonzero(np.diff(users)) + 1]  # each user's first event
    delays[firsts] = rng.integers(0, 3_600_000, k)
    elapsed = np.cumsum(delays)
    offsets = np.repeat(elapsed[firsts] - delays[firsts], per_user)
    ts = elapsed - offsets  # per user: the sum of its own delays
    held_back = np.where(rng.random(size) < 0.05, rng.integers(0, 8_000, size), 0)
    order = np.argsort(ts + held_back, kind="stable")
    frame = pd.DataFrame({
        "key": np.char.add("u", users[order].astype(str)),
        "ts": ts[order],
        "value": np.ones(size, dtype=np.int64),
        "seq": np.arange(size, dtype=np.int64),
    })
    tmp = f"{path}.{os.getpid()}.tmp"
    frame.to_parquet(tmp)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    written = make(int(sys.argv[1]), int(sys.argv[2]))
    data = pd.read_parquet(written)
    print(written, len(data), "events,", data.key.nunique(), "users,",
          int((np.diff(data.ts.values) < 0).sum()), "out of order")
