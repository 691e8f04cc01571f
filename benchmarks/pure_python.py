"""Benchmarks of kspark's per-record core, compiled (:mod:`kspark.compiled`) and pure Python side
by side: ``--pure-python-too`` runs the same benchmark again in a process of its own with
``KSPARK_PURE_PYTHON=1`` and prints its lines after the compiled run's."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

FLAG = "--pure-python-too"


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, action="store_true",
                        help="also run kspark as pure Python (KSPARK_PURE_PYTHON=1), after "
                             "the compiled run, in a process of its own")


def core_mode() -> str:
    """How this process runs kspark's per-record core: compiled or pure Python, and why."""
    from kspark import compiled

    return f"kspark's per-record core: {compiled.status()}"


def run_pure(script: str, argv: list[str], drop: tuple[str, ...] = ()) -> None:
    """Run ``script`` with ``argv`` (less :data:`FLAG` and the flags ``drop``) as pure Python
    and print its output, each line marked."""
    args = [a for a in argv if a != FLAG and a not in drop]
    env = {**os.environ, "KSPARK_PURE_PYTHON": "1"}
    proc = subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                          text=True, check=False)
    for line in proc.stdout.splitlines():
        print(f"[pure Python] {line}")
    if proc.returncode != 0:
        sys.exit(f"the pure Python run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
