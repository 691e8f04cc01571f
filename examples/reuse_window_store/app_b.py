"""Application B: answers "how many events of type X did user U have per day in the last 7
days" from application A's window store, which it restores from A's changelog (a read-only
source store) and keeps current as A writes, without keeping any copy or changelog of its own.

    ../../.venv/bin/python app_b.py --user user-07 --type purchase
    ../../.venv/bin/python app_b.py --user user-07 --type purchase --follow   # keep answering
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime

from common import (
    A_CHANGELOG,
    APP_B,
    DAY,
    PARTITIONS,
    STORE,
    paths,
    reader_topology,
    store_key,
)

from kspark import io, serdes
from kspark.spark import StreamsApp


def day_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def ask(app: StreamsApp, questions, answers, key: str) -> None:
    """Ask B's processor about ``key`` as of the latest day in A's store, print its answer and
    the same days read with an interactive query."""
    view = app.store(STORE)
    latest = max((kv.key.window.start for kv in view.all()), default=None)
    if latest is None:
        print("B: A's store is empty so far")
        return
    now = latest + DAY - 1
    questions.send(key, {}, now)
    questions.flush()
    app.process_all_available()
    _, days, _ = answers.records()[-1]
    counts = dict(days)
    print(f"B: {key} per day, last 7 days up to {day_text(latest)} (from B's processor):")
    for day in range(latest - 6 * DAY, latest + DAY, DAY):
        print(f"   {day_text(day)}  {counts.get(day, 0):3d}")
    queried = {kv.key: kv.value for kv in view.fetch_range(key, latest - 6 * DAY, latest)}
    print(f"B: the interactive query app.store({STORE!r}).fetch_range(...) agrees:",
          queried == counts)


def main() -> None:
    parser = argparse.ArgumentParser(description="Application B: reads A's event counts.")
    parser.add_argument("--dir", default="/tmp/kspark-reuse-example")
    parser.add_argument("--user", default="user-07")
    parser.add_argument("--type", default="purchase")
    parser.add_argument("--follow", action="store_true",
                        help="keep running and answer again every --every seconds")
    parser.add_argument("--every", type=float, default=10.0)
    args = parser.parse_args()
    where = paths(args.dir)
    questions = io.memory(serdes.String(), serdes.Json(), partitions=PARTITIONS)
    answers = io.memory(serdes.String(), serdes.Json())
    app = StreamsApp(
        reader_topology(),
        APP_B,
        {
            # A's changelog, partitioned as A's tasks; questions use the same partitioner
            A_CHANGELOG: io.files(os.path.join(where["changelogs"], A_CHANGELOG),
                                  format="kspark", partitions=PARTITIONS),
            "questions": questions,
            "answers": answers,
        },
        checkpoint_dir=where["b"],
        config={"state.changelog.dir": where["changelogs"]},
    )
    started = time.time()
    app.start()
    try:
        app.process_all_available()
        print(f"B: view of A's store ready in {time.time() - started:.1f} s")
        key = store_key(args.user, args.type)
        ask(app, questions, answers, key)
        while args.follow:
            time.sleep(args.every)
            app.process_all_available()
            ask(app, questions, answers, key)
    except KeyboardInterrupt:
        pass
    finally:
        app.stop()


if __name__ == "__main__":
    main()
