"""How an engine's process tells ``benchmarks/peers.py`` where it is (standard library only: each
engine runs in its own environment): a line when the measured run starts, and one line of JSON
with its figures when it ends."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

MEASURING = "peers: measuring"
RESULT = "peers: result "


def measuring() -> float:
    """Say that the measured run starts now; the time (``time.time()``)."""
    print(MEASURING, flush=True)
    return time.time()


def result(**figures: Any) -> None:
    """Hand the run's figures (JSON-able) to the benchmark."""
    print(RESULT + json.dumps(figures), flush=True)
    sys.stdout.flush()


def parser() -> argparse.ArgumentParser:
    """The options every engine's script takes: ``--bootstrap``, ``--input``, ``--counts``,
    ``--pages`` and ``--warm-up-input``."""
    options = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--counts", "--pages"):
        options.add_argument(name, required=True)
    options.add_argument("--warm-up-input", help="run on this topic first, in this process")
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
