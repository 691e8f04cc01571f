"""Topologies the restart tests run in a separate process (importable by name)."""

from __future__ import annotations

from kspark.examples.click_counter import topology as click_topology


def click_counter():
    return click_topology("clicks", "counts"), "clicks", "counts"
