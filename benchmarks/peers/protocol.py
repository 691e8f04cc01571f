"""How an engine's process tells ``benchmarks/peers.py`` where it is (standard library only: each
engine runs in its own environment): a line when the measured run starts, and one line of JSON
with its figures when it ends; a live job (``--live``) says when it runs and stops on SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

MEASURING = "peers: measuring"
RESULT = "peers: result "
LIVE = "peers: live"


def measuring() -> float:
    """Say that the measured run starts now; the time (``time.time()``)."""
    print(MEASURING, flush=True)
    return time.time()


def result(**figures: Any) -> None:
    """Hand the run's figures (JSON-able) to the benchmark."""
    print(RESULT + json.dumps(figures), flush=True)
    sys.stdout.flush()


def live() -> None:
    """Say that a live job (``--live``: reading its input until stopped) has started."""
    print(LIVE, flush=True)


def until_stopped() -> None:
    """Block until SIGTERM or SIGINT (how ``benchmarks/peers_latency.py`` stops a live job)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass


def parser() -> argparse.ArgumentParser:
    """The options every engine's script takes: ``--bootstrap``, ``--input``, ``--counts``,
    ``--pages`` and ``--warm-up-input``."""
    options = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--counts", "--pages"):
        options.add_argument(name, required=True)
    options.add_argument("--warm-up-input", help="run on this topic first, in this process")
    options.add_argument("--live", action="store_true",
                         help="a live job: sessions emitted on every update, the input read "
                              "until SIGTERM (benchmarks/peers_latency.py)")
    options.add_argument("--job", choices=("sessions", "counts"), default="sessions",
                         help="with --live: the sessions job, or a running count of clicks per "
                              "user written to --counts at every click")
    return options


def measure(args: argparse.Namespace, run: Callable[[str, str, str, str], Any]
            ) -> tuple[Any, float, float]:
    """``run(input, counts, pages, tag)`` on the warm-up topic if there is one (its outputs
    ``<counts>-warm-up`` and ``<pages>-warm-up``, tag ``warm-up``), then, after
    :func:`measuring`, on the input (tag ``run``): what the measured run returned, its seconds
    and the warm-up's."""
    warm_up_s = 0.0
    if args.warm_up_input:
        t0 = time.time()
        run(args.warm_up_input, f"{args.counts}-warm-up", f"{args.pages}-warm-up", "warm-up")
        warm_up_s = time.time() - t0
    started = measuring()
    value = run(args.input, args.counts, args.pages, "run")
    return value, time.time() - started, warm_up_s
