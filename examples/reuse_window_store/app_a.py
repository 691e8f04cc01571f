"""Application A: counts events per user and event type per day, kept 30 days.

Each run appends ``--days`` days of generated events after the last ones and processes them
(resuming from A's checkpoint); A's store changes go to its changelog under
``<dir>/changelogs`` (``state.changelog.dir``), which application B reads.

    ../../.venv/bin/python app_a.py --days 40          # first 40 days
    ../../.venv/bin/python app_a.py --days 3           # 3 more days, while B runs (--follow)
"""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import UTC, datetime

from common import APP_A, DAY, PARTITIONS, START_DAY, STORE, counter_topology, paths

from kspark import io
from kspark.spark import StreamsApp

TYPES = ["view", "click", "cart", "purchase"]
WEIGHTS = [60, 25, 10, 5]


def append_events(events_dir: str, days: int, users: int, per_user_day: int, seed: int) -> str:
    """Write ``days`` more days of events, one JSON-lines file per day; return a summary."""
    os.makedirs(events_dir, exist_ok=True)
    files = sorted(f for f in os.listdir(events_dir) if f.endswith(".jsonl"))
    first_day = int(files[-1][len("day-"):-len(".jsonl")]) + 1 if files else 0
    total = 0
    for day in range(first_day, first_day + days):
        rng = random.Random(seed * 100_003 + day)
        rows = [
            {"user": f"user-{u:02d}", "type": rng.choices(TYPES, WEIGHTS)[0],
             "ts": (START_DAY + day) * DAY + rng.randrange(DAY)}
            for u in range(users)
            for _ in range(rng.randint(0, 2 * per_user_day))
        ]
        rows.sort(key=lambda r: r["ts"])
        path = os.path.join(events_dir, f"day-{day:05d}.jsonl")
        with open(path + ".tmp", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        os.replace(path + ".tmp", path)  # hidden from the source until complete
        total += len(rows)
    return f"days {first_day}-{first_day + days - 1}: {total} events"


def main() -> None:
    parser = argparse.ArgumentParser(description="Application A: the event counter.")
    parser.add_argument("--dir", default="/tmp/kspark-reuse-example")
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--events-per-user-day", type=int, default=6)
    args = parser.parse_args()
    where = paths(args.dir)
    print("A: appended", append_events(where["events"], args.days, args.users,
                                       args.events_per_user_day, seed=4))
    app = StreamsApp(
        counter_topology(),
        APP_A,
        # a week of input per micro-batch at most (the windows' grace)
        {"events": io.files(where["events"], key_field="user", timestamp_field="ts",
                            partitions=PARTITIONS, max_files_per_trigger=7)},
        checkpoint_dir=where["a"],
        config={"state.changelog.dir": where["changelogs"]},
    )
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    windows = app.store(STORE).all()
    days = sorted({kv.key.window.start for kv in windows})
    first, last = (datetime.fromtimestamp(d / 1000, UTC).date() for d in (days[0], days[-1]))
    print(f"A: store {STORE!r} holds {len(windows)} windows, days {first} .. {last} "
          f"({len(days)} days kept of retention 30)")
    print(f"A: changelog in {where['changelogs']}")


if __name__ == "__main__":
    main()
