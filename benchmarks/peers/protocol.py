"""How an engine's process tells ``benchmarks/peers.py`` where it is (standard library only: each
engine runs in its own environment): a line when the measured run starts, and one line of JSON
with its figures when it ends."""

from __future__ import annotations

import json
import sys
import time
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
